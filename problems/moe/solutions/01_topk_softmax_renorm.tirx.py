"""GPU (sm_90a) TIRx solution: one warp-sized CTA per token; lane l owns experts l, l+32, ... in registers.
Warp max / sum give the softmax; each of the TOPK passes takes a warp max of the lanes' best probabilities and a
warp min of the matching expert ids (first index on ties), and the owner lane knocks that expert out.
TVM compiles CUDA with --use_fast_math (expf -> ex2.approx, '/' approximate), so exp is computed here with a
Cody-Waite reduction + degree-7 polynomial on __fmaf_rn, and divisions use __fdiv_rn."""
import torch
import tvm
from tvm.script import tirx as T

TOPK = 8          # the problem's TOPK (Qwen3-30B-A3B num_experts_per_tok)
_compiled = {}
_TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125        # 15 significant bits: n * _LN2_HI is exact for |n| < 512
_LN2_LO = 1.4286068203094173e-06   # ln(2) - _LN2_HI
_NEG_BIG = -3.0e38                 # "no expert" sentinel (logits are finite)


def _fma(a, b, c):
    return T.call_pure_extern("float32", "__fmaf_rn", a, b, c)


def _div(a, b):
    return T.call_pure_extern("float32", "__fdiv_rn", a, b)


def _build(tokens, experts, topk):
    per_lane = (experts + 31) // 32

    @T.prim_func
    def topk_softmax(x_ptr: T.handle, w_ptr: T.handle, id_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, experts), "float32")
        W = T.match_buffer(w_ptr, (tokens, topk), "float32")
        ID = T.match_buffer(id_ptr, (tokens, topk), "int32")
        T.device_entry()
        t = T.cta_id([tokens])
        lane = T.thread_id([32])
        p = T.alloc_local((per_lane,), "float32")
        sel_w = T.alloc_local((topk,), "float32")
        sel_i = T.alloc_local((topk,), "int32")
        f = T.alloc_local((6,), "float32")   # 0: local max/sum/best, 1..4: exp scratch, 5: selected-weight sum
        bi = T.alloc_local((1,), "int32")
        # Load this lane's logits; missing experts (EXPERTS not a multiple of 32) get the sentinel.
        for j in T.unroll(per_lane):
            p[j] = T.float32(_NEG_BIG)
            if j * 32 + lane < experts:
                p[j] = X[t, j * 32 + lane]
        f[0] = T.float32(_NEG_BIG)
        for j in T.unroll(per_lane):
            f[0] = T.max(f[0], p[j])
        m = T.cuda.warp_max(f[0])
        # p <- exp(p - m) for real experts (-2 for missing ones: never selected, not summed).
        for j in T.unroll(per_lane):
            if j * 32 + lane < experts:
                f[1] = T.max(p[j] - m, T.float32(-87.0))                     # x in [-87, 0]
                f[2] = T.floor(f[1] * T.float32(_LOG2E) + T.float32(0.5))      # n = round(x / ln2)
                f[3] = _fma(f[2], T.float32(-_LN2_HI), f[1])
                f[3] = _fma(f[2], T.float32(-_LN2_LO), f[3])                  # r = x - n ln2, |r| <= 0.35
                f[4] = T.float32(1.0 / 5040.0)
                f[4] = _fma(f[4], f[3], T.float32(1.0 / 720.0))
                f[4] = _fma(f[4], f[3], T.float32(1.0 / 120.0))
                f[4] = _fma(f[4], f[3], T.float32(1.0 / 24.0))
                f[4] = _fma(f[4], f[3], T.float32(1.0 / 6.0))
                f[4] = _fma(f[4], f[3], T.float32(0.5))
                f[4] = _fma(f[4], f[3], T.float32(1.0))
                f[4] = _fma(f[4], f[3], T.float32(1.0))                       # exp(r)
                p[j] = f[4] * T.reinterpret("float32", (T.Cast("int32", f[2]) + 127) * 8388608)   # * 2^n
            else:
                p[j] = T.float32(-2.0)
        f[0] = T.float32(0)
        for j in T.unroll(per_lane):
            if j * 32 + lane < experts:
                f[0] = f[0] + p[j]
        s = T.cuda.warp_sum(f[0])
        for j in T.unroll(per_lane):
            if j * 32 + lane < experts:
                p[j] = _div(p[j], s)
        # TOPK passes of a warp-wide argmax.
        for k in T.unroll(topk):
            f[0] = T.float32(-3.0)
            bi[0] = 1 << 30
            for j in T.unroll(per_lane):
                if p[j] > f[0]:
                    f[0] = p[j]
                    bi[0] = j * 32 + lane
            wv = T.cuda.warp_max(f[0])
            wi = T.cuda.warp_min(T.if_then_else(f[0] == wv, bi[0], 1 << 30))
            sel_w[k] = wv
            sel_i[k] = wi
            for j in T.unroll(per_lane):
                if j * 32 + lane == wi:
                    p[j] = T.float32(-1.0)
        f[5] = T.float32(0)
        for k in T.unroll(topk):
            f[5] = f[5] + sel_w[k]
        if lane == 0:
            for k in T.unroll(topk):
                W[t, k] = _div(sel_w[k], f[5])
                ID[t, k] = sel_i[k]

    return tvm.compile(tvm.IRModule({"main": topk_softmax}), target=_TARGET, tir_pipeline="tirx")["main"]


def solve(router_logits):
    tokens, experts = router_logits.shape
    if experts < TOPK or router_logits.dtype != torch.float32 or not router_logits.is_contiguous():
        raise ValueError(f"need a contiguous float32 (TOKENS, EXPERTS >= {TOPK}) tensor")
    key = (tokens, experts, TOPK)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    weights = torch.empty(tokens, TOPK, dtype=torch.float32, device=router_logits.device)
    ids = torch.empty(tokens, TOPK, dtype=torch.int32, device=router_logits.device)
    _compiled[key](router_logits, weights, ids)
    return weights, ids
