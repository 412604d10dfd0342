"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially in fp32: every row is split over 256
strided lanes (v = i * 256 + lane, the GPU's threads), each keeping an online log-sum-exp state (running max m,
running sum s of exp(x - m)); the row max M is the max of the lanes' maxima and the lanes' sums, rescaled by
exp(m_lane - M), are added by a pairwise tree; loss = M + log(S) - x[label] (the one log per row in fp64), or 0
for IGNORE_INDEX."""
import torch
import tvm
from tvm.script import tirx as T

IGNORE_INDEX = -100
LANES = 256  # the GPU solutions' threads per row
LOG_LANES = 8
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(tokens: int, vocab: int):
    iters = (vocab + LANES - 1) // LANES

    @T.prim_func
    def cross_entropy(x_ptr: T.handle, l_ptr: T.handle, o_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, vocab), "bfloat16")
        L = T.match_buffer(l_ptr, (tokens,), "int64")
        O = T.match_buffer(o_ptr, (tokens,), "float32")
        m = T.alloc_buffer((LANES,), "float32")
        s = T.alloc_buffer((LANES,), "float32")
        nm = T.alloc_buffer((1,), "float32")
        for r in T.serial(tokens):
            for l in T.serial(LANES):
                m[l] = T.float32(NEG_BIG)
                s[l] = T.float32(0)
            for i in T.serial(iters):
                for l in T.serial(LANES):
                    if i * LANES + l < vocab:
                        xv = T.Cast("float32", X[r, i * LANES + l])
                        nm[0] = T.max(m[l], xv)
                        s[l] = s[l] * T.exp(m[l] - nm[0]) + T.exp(xv - nm[0])
                        m[l] = nm[0]
            nm[0] = T.float32(NEG_BIG)
            for l in T.serial(LANES):
                nm[0] = T.max(nm[0], m[l])
            for l in T.serial(LANES):
                s[l] = s[l] * T.exp(m[l] - nm[0])
            for st in T.serial(LOG_LANES):  # pairwise tree, as the GPU's shuffle reduction
                for l in T.serial(T.shift_right(LANES // 2, st)):
                    s[l] = s[l] + s[l + T.shift_right(LANES // 2, st)]
            if L[r] == T.int64(IGNORE_INDEX):
                O[r] = T.float32(0)
            else:
                O[r] = T.Cast("float32", T.Cast("float64", nm[0]) + T.log(T.Cast("float64", s[0]))
                              - T.Cast("float64", X[r, L[r]]))

    return tvm.compile(tvm.IRModule({"main": cross_entropy}), target="llvm", tir_pipeline="tirx")["main"]


def solve(logits: torch.Tensor, labels: torch.Tensor):
    if logits.dtype != torch.bfloat16 or labels.dtype != torch.int64:
        raise ValueError("expects bfloat16 logits and int64 labels")
    tokens, vocab = logits.shape
    if labels.shape != (tokens,):
        raise ValueError(f"labels must have shape ({tokens},)")
    key = (tokens, vocab)
    if key not in _compiled:
        _compiled[key] = _build(tokens, vocab)
    loss = torch.empty(tokens, dtype=torch.float32, device=logits.device)
    _compiled[key](logits.contiguous(), labels.contiguous(), loss)
    return loss
