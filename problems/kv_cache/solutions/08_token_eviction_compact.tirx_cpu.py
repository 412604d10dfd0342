"""CPU-target (LLVM) TIRx solution, in place and without a staging buffer: keep_idx is strictly increasing, so
keep_idx[b, h, j] >= j; walking j upward for each (sequence, head), row keep_idx[b, h, j] is copied onto row j
before any later write can reach it (later writes land on rows > j, later reads on rows > keep_idx[b, h, j]).
Rows >= KEEP are never written."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch, heads, seq, dim, keep):
    @T.prim_func
    def compact(kc_ptr: T.handle, vc_ptr: T.handle, idx_ptr: T.handle):
        KC = T.match_buffer(kc_ptr, (batch, heads, seq, dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (batch, heads, seq, dim), "bfloat16")
        IDX = T.match_buffer(idx_ptr, (batch, heads, keep), "int32")
        for b in T.serial(batch):
            for h in T.serial(heads):
                for j in T.serial(keep):
                    src = IDX[b, h, j]
                    for d in T.serial(dim):
                        KC[b, h, j, d] = KC[b, h, src, d]
                        VC[b, h, j, d] = VC[b, h, src, d]

    return tvm.compile(tvm.IRModule({"main": compact}), target="llvm", tir_pipeline="tirx")["main"]


def solve(key_cache, value_cache, keep_idx):
    batch, heads, seq, dim = key_cache.shape
    if key_cache.dtype != torch.bfloat16 or value_cache.dtype != torch.bfloat16 or value_cache.shape != key_cache.shape:
        raise ValueError("key_cache and value_cache must be bfloat16 (BATCH, KV_HEADS, SEQ, HEAD_DIM)")
    if keep_idx.dtype != torch.int32 or keep_idx.dim() != 3 or tuple(keep_idx.shape[:2]) != (batch, heads):
        raise ValueError("keep_idx must be int32 (BATCH, KV_HEADS, KEEP)")
    keep = keep_idx.shape[2]
    if keep > seq:
        raise ValueError(f"KEEP={keep} exceeds the cache length {seq}")
    for x in (key_cache, value_cache, keep_idx):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous (the caches are compacted in place)")
    shape_key = (batch, heads, seq, dim, keep)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](key_cache, value_cache, keep_idx)
