"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially, in place: for every token and every
head of q, then of k, the head's sum of squares is split over 32 strided lanes (d = i * 32 + lane, a warp's lanes
on the GPU) and combined by a pairwise tree in fp32; x * rstd * weight is rounded once to bf16 and written back."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
LANES = 32
LOG_LANES = 5
_compiled = {}


def _build(tokens: int, nq: int, nkv: int, d: int):
    dpl = d // LANES

    @T.prim_func
    def qk_rmsnorm(q_ptr: T.handle, k_ptr: T.handle, qw_ptr: T.handle, kw_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (tokens, nq, d), "bfloat16")
        K = T.match_buffer(k_ptr, (tokens, nkv, d), "bfloat16")
        QW = T.match_buffer(qw_ptr, (d,), "bfloat16")
        KW = T.match_buffer(kw_ptr, (d,), "bfloat16")
        lanes = T.alloc_buffer((LANES,), "float32")
        for t in T.serial(tokens):
            for h in T.serial(nq):
                for l in T.serial(LANES):
                    lanes[l] = T.float32(0)
                for i in T.serial(dpl):
                    for l in T.serial(LANES):
                        lanes[l] = lanes[l] + T.Cast("float32", Q[t, h, i * LANES + l]) * T.Cast("float32", Q[t, h, i * LANES + l])
                for s in T.serial(LOG_LANES):
                    for l in T.serial(T.shift_right(LANES // 2, s)):
                        lanes[l] = lanes[l] + lanes[l + T.shift_right(LANES // 2, s)]
                for j in T.serial(d):
                    rstd = T.rsqrt(lanes[0] / T.float32(d) + T.float32(EPS))
                    Q[t, h, j] = T.Cast("bfloat16", T.Cast("float32", Q[t, h, j]) * rstd * T.Cast("float32", QW[j]))
            for h in T.serial(nkv):
                for l in T.serial(LANES):
                    lanes[l] = T.float32(0)
                for i in T.serial(dpl):
                    for l in T.serial(LANES):
                        lanes[l] = lanes[l] + T.Cast("float32", K[t, h, i * LANES + l]) * T.Cast("float32", K[t, h, i * LANES + l])
                for s in T.serial(LOG_LANES):
                    for l in T.serial(T.shift_right(LANES // 2, s)):
                        lanes[l] = lanes[l] + lanes[l + T.shift_right(LANES // 2, s)]
                for j in T.serial(d):
                    rstd = T.rsqrt(lanes[0] / T.float32(d) + T.float32(EPS))
                    K[t, h, j] = T.Cast("bfloat16", T.Cast("float32", K[t, h, j]) * rstd * T.Cast("float32", KW[j]))

    return tvm.compile(tvm.IRModule({"main": qk_rmsnorm}), target="llvm", tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor):
    for t in (q, k, q_weight, k_weight):
        if t.dtype != torch.bfloat16:
            raise ValueError("expects bfloat16 q, k and weights")
    if not (q.is_contiguous() and k.is_contiguous()):
        raise ValueError("q and k must be contiguous: they are normalised in place")
    tokens, nq, d = q.shape
    if k.dim() != 3 or k.shape[0] != tokens or k.shape[2] != d or q_weight.shape != (d,) or k_weight.shape != (d,):
        raise ValueError("q (tokens, q_heads, d), k (tokens, kv_heads, d) and (d,) weights expected")
    if d % LANES != 0:
        raise ValueError(f"HEAD_DIM={d} must be a multiple of {LANES}")
    nkv = k.shape[1]
    key = (tokens, nq, nkv, d)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    _compiled[key](q, k, q_weight.contiguous(), k_weight.contiguous())
