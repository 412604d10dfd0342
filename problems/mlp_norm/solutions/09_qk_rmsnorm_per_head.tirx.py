"""TIRx (sm_90a) solution, in place: one warp per (token, head) over the q heads followed by the k heads, 4 warps
per CTA, grid (tokens, ceil((q_heads + kv_heads) / 4)). Lane l holds the head's elements d = i * 32 + l
(coalesced), sums their squares in fp32, a warp shuffle sum gives the head's rstd, and the lane writes
x * rstd * weight (q_weight or k_weight, by which tensor the head is in) back in bf16."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
NUM_WARPS = 4
THREADS = NUM_WARPS * 32
_compiled = {}


def _build(tokens: int, nq: int, nkv: int, d: int):
    dpl = d // 32
    head_blocks = (nq + nkv + NUM_WARPS - 1) // NUM_WARPS

    @T.prim_func
    def qk_rmsnorm(q_ptr: T.handle, k_ptr: T.handle, qw_ptr: T.handle, kw_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (tokens, nq, d), "bfloat16")
        K = T.match_buffer(k_ptr, (tokens, nkv, d), "bfloat16")
        QW = T.match_buffer(qw_ptr, (d,), "bfloat16")
        KW = T.match_buffer(kw_ptr, (d,), "bfloat16")
        T.device_entry()
        t, hb = T.cta_id([tokens, head_blocks])
        tx = T.thread_id([THREADS])
        xr = T.alloc_local((dpl,), "float32")
        acc = T.alloc_local((2,), "float32")  # 0: sum of squares, 1: rstd
        warp = tx // 32
        lane = tx % 32
        h = hb * NUM_WARPS + warp
        if h < nq:  # warp-uniform branch: a q head
            acc[0] = T.float32(0)
            for i in T.unroll(dpl):
                xr[i] = T.Cast("float32", Q[t, h, i * 32 + lane])
                acc[0] = acc[0] + xr[i] * xr[i]
            acc[1] = T.rsqrt(T.cuda.warp_sum(acc[0]) / T.float32(d) + T.float32(EPS))
            for i in T.unroll(dpl):
                Q[t, h, i * 32 + lane] = T.Cast("bfloat16", xr[i] * acc[1] * T.Cast("float32", QW[i * 32 + lane]))
        elif h < nq + nkv:  # a k head
            acc[0] = T.float32(0)
            for i in T.unroll(dpl):
                xr[i] = T.Cast("float32", K[t, h - nq, i * 32 + lane])
                acc[0] = acc[0] + xr[i] * xr[i]
            acc[1] = T.rsqrt(T.cuda.warp_sum(acc[0]) / T.float32(d) + T.float32(EPS))
            for i in T.unroll(dpl):
                K[t, h - nq, i * 32 + lane] = T.Cast("bfloat16", xr[i] * acc[1] * T.Cast("float32", KW[i * 32 + lane]))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": qk_rmsnorm}), target=target, tir_pipeline="tirx")


def solve(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor):
    for t in (q, k, q_weight, k_weight):
        if t.dtype != torch.bfloat16:
            raise ValueError("expects bfloat16 q, k and weights")
    if not (q.is_contiguous() and k.is_contiguous()):
        raise ValueError("q and k must be contiguous: they are normalised in place")
    tokens, nq, d = q.shape
    if k.dim() != 3 or k.shape[0] != tokens or k.shape[2] != d or q_weight.shape != (d,) or k_weight.shape != (d,):
        raise ValueError("q (tokens, q_heads, d), k (tokens, kv_heads, d) and (d,) weights expected")
    if d % 32 != 0:
        raise ValueError(f"HEAD_DIM={d} must be a multiple of 32")
    nkv = k.shape[1]
    key = (tokens, nq, nkv, d)
    if key not in _compiled:
        _compiled[key] = _build(*key)["main"]
    _compiled[key](q, k, q_weight.contiguous(), k_weight.contiguous())
