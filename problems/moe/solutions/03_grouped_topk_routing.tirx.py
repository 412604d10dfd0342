"""GPU (sm_90a) TIRx solution: one warp-sized CTA per token; lane l owns expert g * 32 + l of every group g
(groups of 32 experts), keeping its sigmoid score and biased choice value in registers. A group's top-2 sum is a
warp max, a warp min of the matching lane (first on ties) and a warp max over the other lanes; each lane ranks
the 8 group scores itself and knocks out the dropped groups; then each of the TOPK passes takes a warp max of the
lanes' best choice values and a warp min of the matching expert ids, and the owner lane hands over its sigmoid
score (a warp max) and knocks the expert out. Divisions use __fdiv_rn (TVM compiles CUDA with --use_fast_math)."""
import torch
import tvm
from tvm.script import tirx as T

N_GROUP = 8        # the problem's constants (DeepSeek-V3; not inferable from the inputs)
TOPK_GROUP = 4
TOPK = 8
SCALE = 2.5
_NEG_BIG = -3.0e38
_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _div(a, b):
    return T.call_pure_extern("float32", "__fdiv_rn", a, b)


def _build(tokens, experts):
    @T.prim_func
    def grouped_topk(x_ptr: T.handle, b_ptr: T.handle, w_ptr: T.handle, id_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, experts), "float32")
        B = T.match_buffer(b_ptr, (experts,), "float32")
        W = T.match_buffer(w_ptr, (tokens, TOPK), "float32")
        ID = T.match_buffer(id_ptr, (tokens, TOPK), "int32")
        T.device_entry()
        t = T.cta_id([tokens])
        lane = T.thread_id([32])
        s = T.alloc_local((N_GROUP,), "float32")
        c = T.alloc_local((N_GROUP,), "float32")
        gs = T.alloc_local((N_GROUP,), "float32")
        sel_w = T.alloc_local((TOPK,), "float32")
        sel_i = T.alloc_local((TOPK,), "int32")
        f = T.alloc_local((3,), "float32")       # 0: best choice, 1: owner's score, 2: selected-score sum
        ix = T.alloc_local((2,), "int32")        # 0: best expert, 1: group rank
        for g in T.unroll(N_GROUP):
            s[g] = _div(T.float32(1), T.float32(1) + T.exp(-X[t, g * 32 + lane]))
            c[g] = s[g] + B[g * 32 + lane]
        for g in T.unroll(N_GROUP):
            m1 = T.cuda.warp_max(c[g])
            i1 = T.cuda.warp_min(T.if_then_else(c[g] == m1, lane, 32))
            m2 = T.cuda.warp_max(T.if_then_else(lane == i1, T.float32(_NEG_BIG), c[g]))
            gs[g] = m1 + m2
        for g in T.unroll(N_GROUP):
            ix[1] = 0
            for h in T.unroll(N_GROUP):
                if gs[h] > gs[g]:
                    ix[1] = ix[1] + 1
            if ix[1] >= TOPK_GROUP:
                c[g] = T.float32(_NEG_BIG)
        for k in T.unroll(TOPK):
            f[0] = T.float32(_NEG_BIG)
            ix[0] = 1 << 30
            for g in T.unroll(N_GROUP):
                if c[g] > f[0]:
                    f[0] = c[g]
                    ix[0] = g * 32 + lane
            wv = T.cuda.warp_max(f[0])
            wi = T.cuda.warp_min(T.if_then_else(f[0] == wv, ix[0], 1 << 30))
            f[1] = T.float32(-1)
            for g in T.unroll(N_GROUP):
                if g * 32 + lane == wi:
                    f[1] = s[g]
                    c[g] = T.float32(_NEG_BIG)
            sel_w[k] = T.cuda.warp_max(f[1])
            sel_i[k] = wi
        f[2] = T.float32(0)
        for k in T.unroll(TOPK):
            f[2] = f[2] + sel_w[k]
        if lane == 0:
            for k in T.unroll(TOPK):
                W[t, k] = _div(sel_w[k], f[2]) * T.float32(SCALE)
                ID[t, k] = sel_i[k]

    return tvm.compile(tvm.IRModule({"main": grouped_topk}), target=_TARGET, tir_pipeline="tirx")["main"]


def solve(router_logits, correction_bias):
    tokens, experts = router_logits.shape
    if experts != N_GROUP * 32 or correction_bias.shape != (experts,):
        raise ValueError(f"EXPERTS must be {N_GROUP} groups of 32 (one lane per expert) and the bias (EXPERTS,)")
    if router_logits.dtype != torch.float32 or correction_bias.dtype != torch.float32:
        raise ValueError("router_logits and correction_bias must be float32")
    if not router_logits.is_contiguous() or not correction_bias.is_contiguous():
        raise ValueError("inputs must be contiguous")
    key = (tokens, experts)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    weights = torch.empty(tokens, TOPK, dtype=torch.float32, device=router_logits.device)
    ids = torch.empty(tokens, TOPK, dtype=torch.int32, device=router_logits.device)
    _compiled[key](router_logits, correction_bias, weights, ids)
    return weights, ids
