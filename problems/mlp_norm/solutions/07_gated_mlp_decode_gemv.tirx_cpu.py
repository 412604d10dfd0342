"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially: for every output column j the gate
row j and the up row I + j of the weight are dotted with every token's x, each dot split over 32 strided lanes
(k = i * 32 + lane, a warp's lanes on the GPU) and the lanes combined by a pairwise tree, all in fp32; then
y = g / (1 + exp(-g)) * u, rounded once to bf16."""
import torch
import tvm
from tvm.script import tirx as T

LANES = 32
LOG_LANES = 5
_compiled = {}


def _build(batch: int, hidden: int, d: int):
    iters = hidden // LANES

    @T.prim_func
    def gated_gemv(x_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (batch, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (2 * d, hidden), "bfloat16")
        Y = T.match_buffer(y_ptr, (batch, d), "bfloat16")
        acc = T.alloc_buffer((2 * batch, LANES), "float32")  # rows 0..B-1: gate dots, B..2B-1: up dots
        for j in T.serial(d):
            for a in T.serial(2 * batch):
                for l in T.serial(LANES):
                    acc[a, l] = T.float32(0)
            for i in T.serial(iters):
                for l in T.serial(LANES):
                    wg = T.Cast("float32", W[j, i * LANES + l])
                    wu = T.Cast("float32", W[d + j, i * LANES + l])
                    for b in T.serial(batch):
                        xv = T.Cast("float32", X[b, i * LANES + l])
                        acc[b, l] = acc[b, l] + xv * wg
                        acc[batch + b, l] = acc[batch + b, l] + xv * wu
            for s in T.serial(LOG_LANES):
                for a in T.serial(2 * batch):
                    for l in T.serial(T.shift_right(LANES // 2, s)):
                        acc[a, l] = acc[a, l] + acc[a, l + T.shift_right(LANES // 2, s)]
            for b in T.serial(batch):
                g = acc[b, 0]
                Y[b, j] = T.Cast("bfloat16", g / (T.float32(1) + T.exp(T.float32(0) - g)) * acc[batch + b, 0])

    return tvm.compile(tvm.IRModule({"main": gated_gemv}), target="llvm", tir_pipeline="tirx")["main"]


def solve(x: torch.Tensor, w_gate_up: torch.Tensor):
    if x.dtype != torch.bfloat16 or w_gate_up.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x and weight")
    batch, hidden = x.shape
    two_d, w_hidden = w_gate_up.shape
    if w_hidden != hidden or two_d % 2 != 0:
        raise ValueError("weight must be (2 * intermediate, hidden)")
    if hidden % LANES != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {LANES}")
    d = two_d // 2
    key = (batch, hidden, d)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    y = torch.empty(batch, d, dtype=x.dtype, device=x.device)
    _compiled[key](x.contiguous(), w_gate_up.contiguous(), y)
    return y
