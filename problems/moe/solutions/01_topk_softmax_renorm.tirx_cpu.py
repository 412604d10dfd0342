"""CPU-target (LLVM) TIRx solution: serial per token: max, exp and sum, probabilities, then TOPK passes of a
first-index argmax (the winner is knocked out), then renormalisation of the selected weights."""
import torch
import tvm
from tvm.script import tirx as T

TOPK = 8          # the problem's TOPK (Qwen3-30B-A3B num_experts_per_tok)
_compiled = {}


def _build(tokens, experts, topk):
    @T.prim_func
    def topk_softmax(x_ptr: T.handle, w_ptr: T.handle, id_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, experts), "float32")
        W = T.match_buffer(w_ptr, (tokens, topk), "float32")
        ID = T.match_buffer(id_ptr, (tokens, topk), "int32")
        p = T.alloc_buffer((experts,), "float32")
        acc = T.alloc_buffer((3,), "float32")     # running max, sum, selected-weight sum
        best = T.alloc_buffer((1,), "int32")
        for t in T.serial(tokens):
            acc[0] = X[t, 0]
            for e in T.serial(experts):
                acc[0] = T.max(acc[0], X[t, e])
            acc[1] = T.float32(0)
            for e in T.serial(experts):
                p[e] = T.exp(X[t, e] - acc[0])
                acc[1] = acc[1] + p[e]
            for e in T.serial(experts):
                p[e] = p[e] / acc[1]
            acc[2] = T.float32(0)
            for k in T.serial(topk):
                best[0] = 0
                for e in T.serial(experts):
                    if p[e] > p[best[0]]:
                        best[0] = e
                W[t, k] = p[best[0]]
                ID[t, k] = best[0]
                acc[2] = acc[2] + p[best[0]]
                p[best[0]] = T.float32(-1)     # probabilities are >= 0: knocked out of later passes
            for k in T.serial(topk):
                W[t, k] = W[t, k] / acc[2]

    return tvm.compile(tvm.IRModule({"main": topk_softmax}), target="llvm", tir_pipeline="tirx")["main"]


def solve(router_logits):
    tokens, experts = router_logits.shape
    if experts < TOPK or not router_logits.is_contiguous():
        raise ValueError(f"need a contiguous (TOKENS, EXPERTS >= {TOPK}) float32 tensor")
    key = (tokens, experts, TOPK)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    weights = torch.empty(tokens, TOPK, dtype=torch.float32)
    ids = torch.empty(tokens, TOPK, dtype=torch.int32)
    _compiled[key](router_logits, weights, ids)
    return weights, ids
