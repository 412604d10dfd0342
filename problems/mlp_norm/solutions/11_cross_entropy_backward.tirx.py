"""TIRx (sm_90a) solution: one CTA of 256 threads per token row. The CTA first counts the non-ignored targets of
the batch (strided over its threads, a CTA-wide sum). Thread tx reads elements tx, tx + 256, ... of the row once,
keeping an online softmax pair in fp32 (running max m, sum s of exp(x - m), rescaled whenever m grows); the pairs
are merged CTA-wide by the row max M (a CTA max) and S = sum of s * exp(m - M) (a CTA sum). A second pass writes
(exp(x - M) / S - [j == target]) * grad / n_valid in bf16, or zeros when the token's target is ignored."""
import torch
import tvm
from tvm.script import tirx as T

IGNORE_INDEX = -100
THREADS = 256
NUM_WARPS = THREADS // 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


def _build(tokens: int, vocab: int):
    iters = vocab // THREADS
    count_iters = (tokens + THREADS - 1) // THREADS

    @T.prim_func
    def ce_backward(l_ptr: T.handle, t_ptr: T.handle, g_ptr: T.handle, d_ptr: T.handle):
        L = T.match_buffer(l_ptr, (tokens, vocab), "bfloat16")
        TGT = T.match_buffer(t_ptr, (tokens,), "int64")
        G = T.match_buffer(g_ptr, (1,), "float32")
        D = T.match_buffer(d_ptr, (tokens, vocab), "bfloat16")
        T.device_entry()
        row = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        scratch = T.alloc_shared((3 * NUM_WARPS,), "float32")  # one region per CTA-wide reduction
        st = T.alloc_local((4,), "float32")  # 0: valid count, 1: running max, 2: running sum, 3: new max
        red = T.alloc_local((3,), "float32")  # 0: n_valid, 1: row max, 2: row sum
        st[0] = T.float32(0)
        for c in T.serial(count_iters):
            if c * THREADS + tx < tokens:
                if TGT[c * THREADS + tx] != T.int64(IGNORE_INDEX):
                    st[0] = st[0] + T.float32(1)
        red[0] = T.cuda.cta_sum(st[0], NUM_WARPS, scratch.ptr_to([0]))
        st[1] = T.float32(NEG_BIG)
        st[2] = T.float32(0)
        for k in T.serial(iters):
            x = T.Cast("float32", L[row, k * THREADS + tx])
            st[3] = T.max(st[1], x)
            st[2] = st[2] * T.exp(st[1] - st[3]) + T.exp(x - st[3])
            st[1] = st[3]
        red[1] = T.cuda.cta_max(st[1], NUM_WARPS, scratch.ptr_to([NUM_WARPS]))
        red[2] = T.cuda.cta_sum(st[2] * T.exp(st[1] - red[1]), NUM_WARPS, scratch.ptr_to([2 * NUM_WARPS]))
        tgt = TGT[row]
        if tgt == T.int64(IGNORE_INDEX):
            for k in T.serial(iters):
                D[row, k * THREADS + tx] = T.bfloat16(0)
        else:
            coef = G[0] / T.max(red[0], T.float32(1))
            for k in T.serial(iters):
                j = k * THREADS + tx
                p = T.exp(T.Cast("float32", L[row, j]) - red[1]) / red[2]
                hit = T.Select(T.Cast("int64", j) == tgt, T.float32(1), T.float32(0))
                D[row, j] = T.Cast("bfloat16", (p - hit) * coef)

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": ce_backward}), target=target, tir_pipeline="tirx")["main"]


def solve(logits: torch.Tensor, target: torch.Tensor, grad_loss: torch.Tensor):
    tokens, vocab = logits.shape
    if logits.dtype != torch.bfloat16 or target.dtype != torch.int64 or grad_loss.dtype != torch.float32:
        raise ValueError("expects bfloat16 logits, int64 target and a float32 grad_loss")
    if vocab % THREADS != 0:
        raise ValueError(f"VOCAB={vocab} must be a multiple of {THREADS}")
    if tuple(target.shape) != (tokens,) or grad_loss.numel() != 1:
        raise ValueError("target must be (TOKENS,) and grad_loss a single value")
    if logits.numel() >= 2**31:
        raise ValueError("logits too large for 32-bit indexing")
    key = (tokens, vocab)
    if key not in _compiled:
        _compiled[key] = _build(tokens, vocab)
    d_logits = torch.empty_like(logits)
    _compiled[key](logits.contiguous(), target.contiguous(), grad_loss.reshape(1).contiguous(), d_logits)
    return d_logits
