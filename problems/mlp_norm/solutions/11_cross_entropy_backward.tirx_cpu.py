"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially in fp32. First the number of
non-ignored targets is counted. Per token row: 256 strided lanes (the GPU's threads) each keep an online
softmax pair (running max m, sum s of exp(x - m), rescaled whenever m grows) over one read of the row; the lanes
are merged by the row max M and S = sum of s * exp(m - M); a second pass writes
(exp(x - M) / S - [j == target]) * grad / n_valid, or zeros for an ignored token."""
import torch
import tvm
from tvm.script import tirx as T

IGNORE_INDEX = -100
LANES = 256  # the GPU solutions' threads per row
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(tokens: int, vocab: int):
    iters = vocab // LANES

    @T.prim_func
    def ce_backward(l_ptr: T.handle, t_ptr: T.handle, g_ptr: T.handle, d_ptr: T.handle):
        L = T.match_buffer(l_ptr, (tokens, vocab), "bfloat16")
        TGT = T.match_buffer(t_ptr, (tokens,), "int64")
        G = T.match_buffer(g_ptr, (1,), "float32")
        D = T.match_buffer(d_ptr, (tokens, vocab), "bfloat16")
        m = T.alloc_buffer((LANES,), "float32")
        s = T.alloc_buffer((LANES,), "float32")
        red = T.alloc_buffer((4,), "float32")  # 0: n_valid, 1: row max, 2: row sum, 3: new lane max
        red[0] = T.float32(0)
        for i in T.serial(tokens):
            if TGT[i] != T.int64(IGNORE_INDEX):
                red[0] = red[0] + T.float32(1)
        for i in T.serial(tokens):
            for l in T.serial(LANES):
                m[l] = T.float32(NEG_BIG)
                s[l] = T.float32(0)
            for k in T.serial(iters):
                for l in T.serial(LANES):
                    x = T.Cast("float32", L[i, k * LANES + l])
                    red[3] = T.max(m[l], x)
                    s[l] = s[l] * T.exp(m[l] - red[3]) + T.exp(x - red[3])
                    m[l] = red[3]
            red[1] = T.float32(NEG_BIG)
            for l in T.serial(LANES):
                red[1] = T.max(red[1], m[l])
            red[2] = T.float32(0)
            for l in T.serial(LANES):
                red[2] = red[2] + s[l] * T.exp(m[l] - red[1])
            if TGT[i] == T.int64(IGNORE_INDEX):
                for j in T.serial(vocab):
                    D[i, j] = T.bfloat16(0)
            else:
                for j in T.serial(vocab):
                    p = T.exp(T.Cast("float32", L[i, j]) - red[1]) / red[2]
                    hit = T.Select(T.Cast("int64", j) == TGT[i], T.float32(1), T.float32(0))
                    D[i, j] = T.Cast("bfloat16", (p - hit) * (G[0] / T.max(red[0], T.float32(1))))

    return tvm.compile(tvm.IRModule({"main": ce_backward}), target="llvm", tir_pipeline="tirx")["main"]


def solve(logits: torch.Tensor, target: torch.Tensor, grad_loss: torch.Tensor):
    tokens, vocab = logits.shape
    if logits.dtype != torch.bfloat16 or target.dtype != torch.int64 or grad_loss.dtype != torch.float32:
        raise ValueError("expects bfloat16 logits, int64 target and a float32 grad_loss")
    if vocab % LANES != 0:
        raise ValueError(f"VOCAB={vocab} must be a multiple of {LANES}")
    if tuple(target.shape) != (tokens,) or grad_loss.numel() != 1:
        raise ValueError("target must be (TOKENS,) and grad_loss a single value")
    key = (tokens, vocab)
    if key not in _compiled:
        _compiled[key] = _build(tokens, vocab)
    d_logits = torch.empty_like(logits)
    _compiled[key](logits.contiguous(), target.contiguous(), grad_loss.reshape(1).contiguous(), d_logits)
    return d_logits
