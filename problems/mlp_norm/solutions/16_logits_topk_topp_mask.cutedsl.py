"""CuTe DSL (sm_90a) solution: one CTA of 256 threads per row, no sort. Each logit gets an order-preserving integer
key (its fp32 bits, the low 31 bits flipped for negatives, offset by 2^31 into [0, 2^32)). Radix select: 32
greedy steps over the key bits, each a strided pass over the row (L2-resident) with a CTA-wide count (warp
shuffles, then one shared slot per warp in two buffers used alternately, so consecutive reductions never race),
find the TOP_K-th largest key. Compaction: every thread counts its survivors (keys at or above it), takes its
offset as the sum of the counts of the threads before it, and in one more pass writes -inf to the other entries
and its survivors (value, index) to shared memory. Threads 0..TOP_K-1 then each own one survivor:
scaled = logit / temperature, the survivors' max and exp sum, and the mass before it = sum of exp over the
survivors larger than it (pairwise ranking); it writes scaled when that mass is below TOP_P times the total, else
-inf."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

TOP_K = 50
TOP_P = 0.9
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


@cute.jit
def _key(x: cutlass.Float32) -> cutlass.Int64:
    """Order-preserving key of an fp32 value in [0, 2^32)."""
    b = x.bitcast(cutlass.Int32)
    if b < 0:
        b = b ^ 0x7FFFFFFF
    return b.to(cutlass.Int64) + cutlass.Int64(2**31)


def _make_kernel(iters: int):
    @cute.kernel
    def mask_kernel(gL: cute.Tensor, gT: cute.Tensor, gO: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        warp = tidx // 32
        lane = tidx % 32
        smem = cutlass.memory.SmemAllocator()
        red = smem.allocate_tensor(cutlass.Int32, cute.make_layout(2 * NUM_WARPS))
        counts = smem.allocate_tensor(cutlass.Int32, cute.make_layout(THREADS))
        cand_v = smem.allocate_tensor(cutlass.Float32, cute.make_layout(TOP_K))
        cand_i = smem.allocate_tensor(cutlass.Int32, cute.make_layout(TOP_K))

        thr = cutlass.Int64(0)
        for s in range(32):
            trial = thr + (cutlass.Int64(1) << (31 - s).to(cutlass.Int64))
            cnt = cutlass.Int32(0)
            for k in range(iters):
                if _key(gL[row, k * THREADS + tidx]) >= trial:
                    cnt = cnt + 1
            cnt = cute.arch.warp_reduction_sum(cnt)
            if lane == 0:
                red[(s % 2) * NUM_WARPS + warp] = cnt
            cute.arch.sync_threads()
            total = cutlass.Int32(0)
            for w in cutlass.range_constexpr(NUM_WARPS):
                total = total + red[(s % 2) * NUM_WARPS + w]
            if total >= TOP_K:
                thr = trial

        cnt = cutlass.Int32(0)
        for k in range(iters):
            if _key(gL[row, k * THREADS + tidx]) >= thr:
                cnt = cnt + 1
        counts[tidx] = cnt
        cute.arch.sync_threads()
        off = cutlass.Int32(0)
        for t in range(tidx):
            off = off + counts[t]
        for k in range(iters):
            j = k * THREADS + tidx
            v = gL[row, j]
            if _key(v) >= thr:
                if off < TOP_K:
                    cand_v[off] = v
                    cand_i[off] = j
                off = off + 1
            else:
                gO[row, j] = cutlass.Float32(float("-inf"))
        cute.arch.sync_threads()

        if tidx < TOP_K:
            temp = gT[row]
            m = cutlass.Float32(-3.0e38)
            for c in range(TOP_K):
                m = cute.arch.fmax(m, cand_v[c] / temp)
            z = cutlass.Float32(0.0)
            before = cutlass.Float32(0.0)
            mine = cand_v[tidx]
            for c in range(TOP_K):
                e = cute.math.exp(cand_v[c] / temp - m)
                z = z + e
                if cand_v[c] > mine:
                    before = before + e
            res = cutlass.Float32(float("-inf"))
            if before < cutlass.Float32(TOP_P) * z:
                res = mine / temp
            gO[row, cand_i[tidx]] = res

    @cute.jit
    def mask(mL: cute.Tensor, mT: cute.Tensor, mO: cute.Tensor):
        mask_kernel(mL, mT, mO).launch(grid=(mL.shape[0], 1, 1), block=(THREADS, 1, 1))

    return mask


def solve(logits: torch.Tensor, temperature: torch.Tensor):
    batch, vocab = logits.shape
    if logits.dtype != torch.float32 or temperature.dtype != torch.float32:
        raise ValueError("expects float32 logits and temperature")
    if tuple(temperature.shape) != (batch,):
        raise ValueError("temperature must be (BATCH,)")
    if vocab % THREADS != 0 or vocab < TOP_K:
        raise ValueError(f"VOCAB={vocab} must be a multiple of {THREADS} and at least TOP_K={TOP_K}")
    out = torch.empty_like(logits)
    args = [from_dlpack(t) for t in (logits.contiguous(), temperature.contiguous(), out)]
    key = (batch, vocab)
    if key not in _compiled:
        _compiled[key] = cute.compile(_make_kernel(vocab // THREADS), *args)
    _compiled[key](*args)
    return out
