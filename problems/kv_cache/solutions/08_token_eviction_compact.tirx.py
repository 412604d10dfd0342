"""GPU (sm_90a) TIRx solution, in place and without a staging buffer: one CTA per (sequence, KV head, K or V) with
HEAD_DIM threads; thread d owns column d and walks j upward, copying element d of row keep_idx[b, h, j] onto row j.
keep_idx is strictly increasing, so keep_idx[b, h, j] >= j: no thread ever reads a row after it (or another thread,
which owns another column) has overwritten it, and no barrier is needed. Rows >= KEEP are never written."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(batch, heads, seq, dim, keep):
    @T.prim_func
    def compact(kc_ptr: T.handle, vc_ptr: T.handle, idx_ptr: T.handle):
        KC = T.match_buffer(kc_ptr, (batch, heads, seq, dim), "bfloat16")
        VC = T.match_buffer(vc_ptr, (batch, heads, seq, dim), "bfloat16")
        IDX = T.match_buffer(idx_ptr, (batch, heads, keep), "int32")
        T.device_entry()
        b, h, kv = T.cta_id([batch, heads, 2])
        d = T.thread_id([dim])
        if kv == 0:
            for j in T.serial(keep):
                KC[b, h, j, d] = KC[b, h, IDX[b, h, j], d]
        else:
            for j in T.serial(keep):
                VC[b, h, j, d] = VC[b, h, IDX[b, h, j], d]

    return tvm.compile(tvm.IRModule({"main": compact}), target=_TARGET, tir_pipeline="tirx")["main"]


def solve(key_cache, value_cache, keep_idx):
    batch, heads, seq, dim = key_cache.shape
    if key_cache.dtype != torch.bfloat16 or value_cache.dtype != torch.bfloat16 or value_cache.shape != key_cache.shape:
        raise ValueError("key_cache and value_cache must be bfloat16 (BATCH, KV_HEADS, SEQ, HEAD_DIM)")
    if keep_idx.dtype != torch.int32 or keep_idx.dim() != 3 or tuple(keep_idx.shape[:2]) != (batch, heads):
        raise ValueError("keep_idx must be int32 (BATCH, KV_HEADS, KEEP)")
    keep = keep_idx.shape[2]
    if keep > seq or dim > 1024:
        raise ValueError(f"KEEP={keep} must not exceed the cache length {seq}, HEAD_DIM={dim} at most 1024")
    for x in (key_cache, value_cache, keep_idx):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous (the caches are compacted in place)")
    shape_key = (batch, heads, seq, dim, keep)
    if shape_key not in _compiled:
        _compiled[shape_key] = _build(*shape_key)
    _compiled[shape_key](key_cache, value_cache, keep_idx)
