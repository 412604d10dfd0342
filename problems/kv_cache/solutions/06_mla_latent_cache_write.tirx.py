"""GPU (sm_90a) TIRx solution: one CTA of 128 threads per token. Each thread holds KV_LORA_RANK/128 latent elements
in registers; the sum of squares is a CTA-wide sum through shared memory; each thread writes its normed elements
(fp32 x * rstd * weight, one bf16 rounding) into the token's cache row, and threads 0..ROPE_DIM/2-1 rotate one
GPT-J pair of k_pe each into the row's tail."""
import tvm
from tvm.script import tirx as T

EPS = 1e-6
THREADS = 128
_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(tokens, rank, rope, nblocks, bsize, maxpos):
    half = rope // 2
    width = rank + rope
    per_thread = rank // THREADS

    @T.prim_func
    def mla_write(c_ptr: T.handle, pe_ptr: T.handle, w_ptr: T.handle, pos_ptr: T.handle, cs_ptr: T.handle,
                  kv_ptr: T.handle, slot_ptr: T.handle):
        C = T.match_buffer(c_ptr, (tokens, rank), "bfloat16")
        PE = T.match_buffer(pe_ptr, (tokens, rope), "bfloat16")
        W = T.match_buffer(w_ptr, (rank,), "bfloat16")
        P = T.match_buffer(pos_ptr, (tokens,), "int64")
        CS = T.match_buffer(cs_ptr, (maxpos, rope), "float32")
        KV = T.match_buffer(kv_ptr, (nblocks, bsize, width), "bfloat16")
        S = T.match_buffer(slot_ptr, (tokens,), "int64")
        T.device_entry()
        t = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        scratch = T.alloc_shared((THREADS // 32,), "float32")
        x = T.alloc_local((per_thread,), "float32")
        acc = T.alloc_local((1,), "float32")
        slot = T.Cast("int32", S[t])
        blk = slot // bsize
        off = slot % bsize
        acc[0] = T.float32(0)
        for j in T.unroll(per_thread):
            x[j] = T.Cast("float32", C[t, j * THREADS + tx])
            acc[0] = acc[0] + x[j] * x[j]
        total = T.cuda.cta_sum(acc[0], THREADS // 32, scratch.ptr_to([0]))
        rstd = T.rsqrt(total * T.float32(1.0 / rank) + T.float32(EPS))
        for j in T.unroll(per_thread):
            KV[blk, off, j * THREADS + tx] = T.Cast("bfloat16", x[j] * rstd * T.Cast("float32", W[j * THREADS + tx]))
        if tx < half:
            p = T.Cast("int32", P[t])
            c = CS[p, tx]
            s = CS[p, half + tx]
            x1 = T.Cast("float32", PE[t, 2 * tx])
            x2 = T.Cast("float32", PE[t, 2 * tx + 1])
            KV[blk, off, rank + 2 * tx] = T.Cast("bfloat16", x1 * c - x2 * s)
            KV[blk, off, rank + 2 * tx + 1] = T.Cast("bfloat16", x2 * c + x1 * s)

    return tvm.compile(tvm.IRModule({"main": mla_write}), target=_TARGET, tir_pipeline="tirx")["main"]


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
    shape_key = (tokens, rank, rope, nblocks, bsize, cos_sin_cache.shape[0])
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping)
