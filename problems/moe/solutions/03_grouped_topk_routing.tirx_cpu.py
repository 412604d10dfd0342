"""CPU-target (LLVM) TIRx solution: serial per token: sigmoid scores and biased choice values; per group the top-2
sum (max, then max over the other experts); a group is kept when fewer than TOPK_GROUP groups score higher; the
experts of dropped groups are knocked out; then TOPK passes of a first-index argmax over the choice values (the
winner is knocked out) collect ids and unbiased scores, which are renormalised and scaled by 2.5."""
import torch
import tvm
from tvm.script import tirx as T

N_GROUP = 8        # the problem's constants (DeepSeek-V3; not inferable from the inputs)
TOPK_GROUP = 4
TOPK = 8
SCALE = 2.5
_NEG_BIG = -3.0e38
_compiled = {}


def _build(tokens, experts):
    epg = experts // N_GROUP

    @T.prim_func
    def grouped_topk(x_ptr: T.handle, b_ptr: T.handle, w_ptr: T.handle, id_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, experts), "float32")
        B = T.match_buffer(b_ptr, (experts,), "float32")
        W = T.match_buffer(w_ptr, (tokens, TOPK), "float32")
        ID = T.match_buffer(id_ptr, (tokens, TOPK), "int32")
        s = T.alloc_buffer((experts,), "float32")      # sigmoid scores
        c = T.alloc_buffer((experts,), "float32")      # choice values (knocked out as selected / dropped)
        gs = T.alloc_buffer((N_GROUP,), "float32")     # group scores
        f = T.alloc_buffer((3,), "float32")            # group max, second max, selected-score sum
        ix = T.alloc_buffer((2,), "int32")             # argmax, group rank
        for t in T.serial(tokens):
            for e in T.serial(experts):
                s[e] = T.float32(1) / (T.float32(1) + T.exp(-X[t, e]))
                c[e] = s[e] + B[e]
            for g in T.serial(N_GROUP):
                ix[0] = g * epg
                for j in T.serial(epg):
                    if c[g * epg + j] > c[ix[0]]:
                        ix[0] = g * epg + j
                f[0] = c[ix[0]]
                f[1] = T.float32(_NEG_BIG)
                for j in T.serial(epg):
                    if g * epg + j != ix[0]:
                        f[1] = T.max(f[1], c[g * epg + j])
                gs[g] = f[0] + f[1]
            for g in T.serial(N_GROUP):
                ix[1] = 0
                for h in T.serial(N_GROUP):
                    if gs[h] > gs[g]:
                        ix[1] = ix[1] + 1
                if ix[1] >= TOPK_GROUP:
                    for j in T.serial(epg):
                        c[g * epg + j] = T.float32(_NEG_BIG)
            f[2] = T.float32(0)
            for k in T.serial(TOPK):
                ix[0] = 0
                for e in T.serial(experts):
                    if c[e] > c[ix[0]]:
                        ix[0] = e
                ID[t, k] = ix[0]
                W[t, k] = s[ix[0]]
                f[2] = f[2] + s[ix[0]]
                c[ix[0]] = T.float32(_NEG_BIG)
            for k in T.serial(TOPK):
                W[t, k] = W[t, k] / f[2] * T.float32(SCALE)

    return tvm.compile(tvm.IRModule({"main": grouped_topk}), target="llvm", tir_pipeline="tirx")["main"]


def solve(router_logits, correction_bias):
    tokens, experts = router_logits.shape
    if experts % N_GROUP != 0 or experts // N_GROUP < 2 or correction_bias.shape != (experts,):
        raise ValueError(f"EXPERTS must split into {N_GROUP} groups of >= 2 and the bias be (EXPERTS,)")
    if router_logits.dtype != torch.float32 or correction_bias.dtype != torch.float32:
        raise ValueError("router_logits and correction_bias must be float32")
    if not router_logits.is_contiguous() or not correction_bias.is_contiguous():
        raise ValueError("inputs must be contiguous")
    key = (tokens, experts)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    weights = torch.empty(tokens, TOPK, dtype=torch.float32)
    ids = torch.empty(tokens, TOPK, dtype=torch.int32)
    _compiled[key](router_logits, correction_bias, weights, ids)
    return weights, ids
