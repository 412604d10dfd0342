"""GPU (sm_90a) CuTe DSL solution: one CTA of 128 threads per token. Each thread holds KV_LORA_RANK/128 latent
elements in registers; the sum of squares is a warp butterfly sum, then one shared-memory slot per warp; each
thread writes its normed elements (fp32 x * rstd * weight, one bf16 rounding) into the token's cache row, and
threads 0..ROPE_DIM/2-1 rotate one GPT-J pair of k_pe each into the row's tail."""
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 128
NUM_WARPS = THREADS // 32
_compiled = {}


@cute.kernel
def _mla_write_kernel(mC: cute.Tensor, mPE: cute.Tensor, mW: cute.Tensor, mP: cute.Tensor, mCS: cute.Tensor,
                      mKV: cute.Tensor, mS: cute.Tensor, rank: cutlass.Constexpr, half: cutlass.Constexpr,
                      bsize: cutlass.Constexpr):
    tx, _, _ = cute.arch.thread_idx()
    t, _, _ = cute.arch.block_idx()
    smem = cutlass.memory.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
    per_thread = rank // THREADS
    x = cute.make_rmem_tensor((per_thread,), cutlass.Float32)
    slot = cutlass.Int32(mS[t])
    blk = slot // bsize
    off = slot % bsize
    acc = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(per_thread):
        x[j] = mC[t, j * THREADS + tx].to(cutlass.Float32)
        acc = acc + x[j] * x[j]
    acc = cute.arch.warp_reduction_sum(acc)
    if tx % 32 == 0:
        red[tx // 32] = acc
    cute.arch.sync_threads()
    total = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(NUM_WARPS):
        total = total + red[w]
    rstd = cute.math.rsqrt(total * cutlass.Float32(1.0 / rank) + cutlass.Float32(EPS))
    for j in cutlass.range_constexpr(per_thread):
        e = j * THREADS + tx
        mKV[blk, off, e] = (x[j] * rstd * mW[e].to(cutlass.Float32)).to(cutlass.BFloat16)
    if tx < half:
        p = cutlass.Int32(mP[t])
        c = mCS[p, tx]
        s = mCS[p, half + tx]
        x1 = mPE[t, 2 * tx].to(cutlass.Float32)
        x2 = mPE[t, 2 * tx + 1].to(cutlass.Float32)
        mKV[blk, off, rank + 2 * tx] = (x1 * c - x2 * s).to(cutlass.BFloat16)
        mKV[blk, off, rank + 2 * tx + 1] = (x2 * c + x1 * s).to(cutlass.BFloat16)


@cute.jit
def _mla_write(mC: cute.Tensor, mPE: cute.Tensor, mW: cute.Tensor, mP: cute.Tensor, mCS: cute.Tensor,
               mKV: cute.Tensor, mS: cute.Tensor, tokens: cutlass.Constexpr, rank: cutlass.Constexpr,
               half: cutlass.Constexpr, bsize: cutlass.Constexpr):
    _mla_write_kernel(mC, mPE, mW, mP, mCS, mKV, mS, rank, half, bsize).launch(grid=(tokens, 1, 1),
                                                                               block=(THREADS, 1, 1))


def solve(kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping):
    tokens, rank = kv_c.shape
    rope = k_pe.shape[1]
    nblocks, bsize, width = kv_cache.shape
    if width != rank + rope or rope % 2 != 0 or cos_sin_cache.shape[1] != rope:
        raise ValueError("cache rows must be KV_LORA_RANK + ROPE_DIM wide, ROPE_DIM even and the cos/sin width")
    if rank % THREADS != 0 or rope // 2 > THREADS:
        raise ValueError(f"KV_LORA_RANK must be a multiple of {THREADS} and ROPE_DIM at most {2 * THREADS}")
    for x in (kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    args = [from_dlpack(x) for x in (kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping)]
    shape_key = (tokens, rank, rope, nblocks, bsize, cos_sin_cache.shape[0])
    if shape_key not in _compiled:
        _compiled[shape_key] = cute.compile(_mla_write, *args, tokens, rank, rope // 2, bsize)
    _compiled[shape_key](*args)
