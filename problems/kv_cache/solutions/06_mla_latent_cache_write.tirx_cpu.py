"""CPU-target (LLVM) TIRx solution: serial loop per token: sum of squares of the latent, rstd, then the normed
latent x * rstd * weight (fp32, one bf16 rounding) and the GPT-J-rotated pairs of k_pe written straight into the
token's cache row."""
import tvm
from tvm.script import tirx as T

EPS = 1e-6
_compiled = {}


def _build(tokens, rank, rope, nblocks, bsize, maxpos):
    half = rope // 2
    width = rank + rope

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
        acc = T.alloc_buffer((2,), "float32")   # sum of squares, rstd
        for t in T.serial(tokens):
            slot = T.Cast("int32", S[t])
            blk = slot // bsize
            off = slot % bsize
            p = T.Cast("int32", P[t])
            acc[0] = T.float32(0)
            for j in T.serial(rank):
                acc[0] = acc[0] + T.Cast("float32", C[t, j]) * T.Cast("float32", C[t, j])
            acc[1] = T.float32(1) / T.sqrt(acc[0] / T.float32(rank) + T.float32(EPS))
            for j in T.serial(rank):
                KV[blk, off, j] = T.Cast("bfloat16", T.Cast("float32", C[t, j]) * acc[1] * T.Cast("float32", W[j]))
            for i in T.serial(half):
                x1 = T.Cast("float32", PE[t, 2 * i])
                x2 = T.Cast("float32", PE[t, 2 * i + 1])
                KV[blk, off, rank + 2 * i] = T.Cast("bfloat16", x1 * CS[p, i] - x2 * CS[p, half + i])
                KV[blk, off, rank + 2 * i + 1] = T.Cast("bfloat16", x2 * CS[p, i] + x1 * CS[p, half + i])

    return tvm.compile(tvm.IRModule({"main": mla_write}), target="llvm", tir_pipeline="tirx")["main"]


def solve(kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping):
    tokens, rank = kv_c.shape
    rope = k_pe.shape[1]
    nblocks, bsize, width = kv_cache.shape
    if width != rank + rope or rope % 2 != 0 or cos_sin_cache.shape[1] != rope:
        raise ValueError("cache rows must be KV_LORA_RANK + ROPE_DIM wide, ROPE_DIM even and the cos/sin width")
    for x in (kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    shape_key = (tokens, rank, rope, nblocks, bsize, cos_sin_cache.shape[0])
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](kv_c, k_pe, norm_weight, positions, cos_sin_cache, kv_cache, slot_mapping)
