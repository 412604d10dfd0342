"""GPU (sm_90a) TIRx solution: one CTA per token with EXPERTS threads, thread e owns grad[t, e]. The renormalised
top-k weights are the softmax of the TOPK selected logits alone, so a thread whose expert is not among topk_ids[t]
writes exactly 0; the thread of the k-th selected expert reads the TOPK selected logits and upstream gradients and
writes w_k * (dw_k - sum_j w_j dw_j), w = softmax of the selected logits. That short chain runs in float64 (TVM builds
CUDA with --use_fast_math, where float32 exp and '/' are approximate) and is rounded once to float32."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(tokens, experts, topk):
    @T.prim_func
    def router_bwd(x_ptr: T.handle, id_ptr: T.handle, dw_ptr: T.handle, g_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, experts), "float32")
        ID = T.match_buffer(id_ptr, (tokens, topk), "int32")
        DW = T.match_buffer(dw_ptr, (tokens, topk), "float32")
        G = T.match_buffer(g_ptr, (tokens, experts), "float32")
        T.device_entry()
        t = T.cta_id([tokens])
        e = T.thread_id([experts])
        sel = T.alloc_local((1,), "int32")
        acc = T.alloc_local((3,), "float64")      # max logit, sum of exp, sum of exp * dw
        sel[0] = -1
        for k in T.unroll(topk):
            if ID[t, k] == e:
                sel[0] = k
        if sel[0] < 0:
            G[t, e] = T.float32(0)
        else:
            acc[0] = T.Cast("float64", X[t, ID[t, 0]])
            for k in T.unroll(topk):
                acc[0] = T.max(acc[0], T.Cast("float64", X[t, ID[t, k]]))
            acc[1] = T.float64(0)
            acc[2] = T.float64(0)
            for k in T.unroll(topk):
                acc[1] = acc[1] + T.exp(T.Cast("float64", X[t, ID[t, k]]) - acc[0])
                acc[2] = acc[2] + T.exp(T.Cast("float64", X[t, ID[t, k]]) - acc[0]) * T.Cast("float64", DW[t, k])
            w = T.exp(T.Cast("float64", X[t, e]) - acc[0]) / acc[1]
            G[t, e] = T.Cast("float32", w * (T.Cast("float64", DW[t, sel[0]]) - acc[2] / acc[1]))

    return tvm.compile(tvm.IRModule({"main": router_bwd}), target=_TARGET, tir_pipeline="tirx")["main"]


def solve(router_logits, topk_ids, grad_weights):
    tokens, experts = router_logits.shape
    if router_logits.dtype != torch.float32 or grad_weights.dtype != torch.float32:
        raise ValueError("router_logits and grad_weights must be float32")
    if topk_ids.dtype != torch.int32 or topk_ids.dim() != 2 or topk_ids.shape[0] != tokens:
        raise ValueError("topk_ids must be int32 (TOKENS, TOPK)")
    if grad_weights.shape != topk_ids.shape or experts > 1024:
        raise ValueError("grad_weights must be (TOKENS, TOPK), EXPERTS at most 1024 (one thread per expert)")
    for x in (router_logits, topk_ids, grad_weights):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    key = (tokens, experts, topk_ids.shape[1])
    if key not in _compiled:
        _compiled[key] = _build(*key)
    grad_logits = torch.empty(tokens, experts, dtype=torch.float32, device=router_logits.device)
    _compiled[key](router_logits, topk_ids, grad_weights, grad_logits)
    return grad_logits
