"""CPU-target (LLVM) TIRx solution, the GPU kernel's algorithm run serially: the renormalised top-k weights are the
softmax of the TOPK selected logits alone, so for each token and expert e: if e is the k-th selected expert,
grad = w_k * (dw_k - sum_j w_j dw_j) with w = softmax(logits[t, topk_ids[t]]) (computed in float64 from the
selected logits only, rounded once to float32); every other expert gets exactly 0."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(tokens, experts, topk):
    @T.prim_func
    def router_bwd(x_ptr: T.handle, id_ptr: T.handle, dw_ptr: T.handle, g_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, experts), "float32")
        ID = T.match_buffer(id_ptr, (tokens, topk), "int32")
        DW = T.match_buffer(dw_ptr, (tokens, topk), "float32")
        G = T.match_buffer(g_ptr, (tokens, experts), "float32")
        sel = T.alloc_buffer((1,), "int32")
        acc = T.alloc_buffer((3,), "float64")     # max logit, sum of exp, sum of exp * dw
        for t in T.serial(tokens):
            for e in T.serial(experts):
                sel[0] = -1
                for k in T.serial(topk):
                    if ID[t, k] == e:
                        sel[0] = k
                if sel[0] < 0:
                    G[t, e] = T.float32(0)
                else:
                    acc[0] = T.Cast("float64", X[t, ID[t, 0]])
                    for k in T.serial(topk):
                        acc[0] = T.max(acc[0], T.Cast("float64", X[t, ID[t, k]]))
                    acc[1] = T.float64(0)
                    acc[2] = T.float64(0)
                    for k in T.serial(topk):
                        acc[1] = acc[1] + T.exp(T.Cast("float64", X[t, ID[t, k]]) - acc[0])
                        acc[2] = acc[2] + T.exp(T.Cast("float64", X[t, ID[t, k]]) - acc[0]) * T.Cast("float64", DW[t, k])
                    w = T.exp(T.Cast("float64", X[t, e]) - acc[0]) / acc[1]
                    G[t, e] = T.Cast("float32", w * (T.Cast("float64", DW[t, sel[0]]) - acc[2] / acc[1]))

    return tvm.compile(tvm.IRModule({"main": router_bwd}), target="llvm", tir_pipeline="tirx")["main"]


def solve(router_logits, topk_ids, grad_weights):
    tokens, experts = router_logits.shape
    if router_logits.dtype != torch.float32 or grad_weights.dtype != torch.float32:
        raise ValueError("router_logits and grad_weights must be float32")
    if topk_ids.dtype != torch.int32 or topk_ids.dim() != 2 or topk_ids.shape[0] != tokens:
        raise ValueError("topk_ids must be int32 (TOKENS, TOPK)")
    if grad_weights.shape != topk_ids.shape:
        raise ValueError("grad_weights must be (TOKENS, TOPK)")
    for x in (router_logits, topk_ids, grad_weights):
        if not x.is_contiguous():
            raise ValueError("all tensors must be contiguous")
    key = (tokens, experts, topk_ids.shape[1])
    if key not in _compiled:
        _compiled[key] = _build(*key)
    grad_logits = torch.empty(tokens, experts, dtype=torch.float32)
    _compiled[key](router_logits, topk_ids, grad_weights, grad_logits)
    return grad_logits
