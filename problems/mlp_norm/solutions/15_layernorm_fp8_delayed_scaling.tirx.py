"""TIRx (sm_90a) solution in two kernels of one module, atomic-free.
rows: one CTA of 256 threads per token row; thread tx holds elements tx, tx + 256, ... in fp32 registers. The sums
of x and x^2 are taken in float64 (exact for bf16 inputs; two CTA-wide sums, each on its own shared scratch), so
mean and rstd, each rounded once to float32, are as exact as the amax output's tight bound needs. Then
y = (x - mean) * rstd * weight + bias in fp32, q = e4m3fn(clamp(y * scale, -448, 448)) (round to nearest even,
saturating), and the CTA max of |y| is stored as the row's amax, taken from the y values already in registers.
fold: one CTA folds the TOKENS row maxima with a CTA max into the new history entry 0 and shifts the rest of the
history by one."""
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
FP8_MAX = 448.0
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


def _build(tokens: int, hidden: int, history: int):
    iters = hidden // THREADS
    fold_iters = (tokens + THREADS - 1) // THREADS
    shift_iters = (history + THREADS - 1) // THREADS

    @T.prim_func
    def rows(x_ptr: T.handle, w_ptr: T.handle, b_ptr: T.handle, s_ptr: T.handle, q_ptr: T.handle,
             r_ptr: T.handle):
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        B = T.match_buffer(b_ptr, (hidden,), "bfloat16")
        S = T.match_buffer(s_ptr, (1,), "float32")
        Q = T.match_buffer(q_ptr, (tokens, hidden), "float8_e4m3fn")
        RMAX = T.match_buffer(r_ptr, (tokens,), "float32")
        T.device_entry()
        row = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        scratch64 = T.alloc_shared((2 * NUM_WARPS,), "float64")
        scratch32 = T.alloc_shared((NUM_WARPS,), "float32")
        xv = T.alloc_local((iters,), "float32")
        acc = T.alloc_local((2,), "float64")  # 0: sum x, 1: sum x^2
        tot = T.alloc_local((2,), "float64")
        stat = T.alloc_local((3,), "float32")  # 0: mean, 1: rstd, 2: running max |y|
        acc[0] = T.float64(0)
        acc[1] = T.float64(0)
        for k in T.unroll(iters):
            xv[k] = T.Cast("float32", X[row, k * THREADS + tx])
            acc[0] = acc[0] + T.Cast("float64", xv[k])
            acc[1] = acc[1] + T.Cast("float64", xv[k]) * T.Cast("float64", xv[k])
        tot[0] = T.cuda.cta_sum(acc[0], NUM_WARPS, scratch64.ptr_to([0])) / T.float64(hidden)
        tot[1] = T.cuda.cta_sum(acc[1], NUM_WARPS, scratch64.ptr_to([NUM_WARPS])) / T.float64(hidden)
        stat[0] = T.Cast("float32", tot[0])
        stat[1] = T.Cast("float32", T.float64(1) / T.sqrt(
            T.max(tot[1] - tot[0] * tot[0], T.float64(0)) + T.float64(EPS)))
        stat[2] = T.float32(0)
        for k in T.unroll(iters):
            y = (xv[k] - stat[0]) * stat[1] * T.Cast("float32", W[k * THREADS + tx]) + T.Cast("float32", B[k * THREADS + tx])
            stat[2] = T.max(stat[2], T.abs(y))
            Q[row, k * THREADS + tx] = T.Cast("float8_e4m3fn", T.min(T.max(y * S[0], T.float32(-FP8_MAX)),
                                                                    T.float32(FP8_MAX)))
        rmax = T.cuda.cta_max(stat[2], NUM_WARPS, scratch32.ptr_to([0]))
        if tx == 0:
            RMAX[row] = rmax

    @T.prim_func
    def fold(r_ptr: T.handle, h_ptr: T.handle, n_ptr: T.handle):
        RMAX = T.match_buffer(r_ptr, (tokens,), "float32")
        HIST = T.match_buffer(h_ptr, (history,), "float32")
        NEW = T.match_buffer(n_ptr, (history,), "float32")
        T.device_entry()
        cta = T.cta_id([1])  # noqa: F841 - declares the launch grid (one CTA)
        tx = T.thread_id([THREADS])
        scratch = T.alloc_shared((NUM_WARPS,), "float32")
        m = T.alloc_local((1,), "float32")
        m[0] = T.float32(0)
        for c in T.serial(fold_iters):
            if c * THREADS + tx < tokens:
                m[0] = T.max(m[0], RMAX[c * THREADS + tx])
        amax = T.cuda.cta_max(m[0], NUM_WARPS, scratch.ptr_to([0]))
        if tx == 0:
            NEW[0] = amax
        for c in T.serial(shift_iters):
            if c * THREADS + tx + 1 < history:
                NEW[c * THREADS + tx + 1] = HIST[c * THREADS + tx]

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    exe = tvm.compile(tvm.IRModule({"rows": rows, "fold": fold}), target=target, tir_pipeline="tirx")
    return exe["rows"], exe["fold"]


def solve(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor,
          amax_history: torch.Tensor):
    tokens, hidden = x.shape
    history = amax_history.shape[0]
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 x, weight and bias")
    if scale.dtype != torch.float32 or scale.numel() != 1:
        raise ValueError("scale must be a single float32 value")
    if amax_history.dtype != torch.float32 or amax_history.dim() != 1 or history < 2:
        raise ValueError("amax_history must be a float32 vector of at least 2 entries")
    if tuple(weight.shape) != (hidden,) or tuple(bias.shape) != (hidden,):
        raise ValueError("weight and bias must be (HIDDEN,)")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    key = (tokens, hidden, history)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    rows, fold = _compiled[key]
    q = torch.empty((tokens, hidden), dtype=torch.float8_e4m3fn, device=x.device)
    row_amax = torch.empty(tokens, dtype=torch.float32, device=x.device)
    new_history = torch.empty_like(amax_history)
    rows(x.contiguous(), weight.contiguous(), bias.contiguous(), scale.reshape(1).contiguous(), q, row_amax)
    fold(row_amax, amax_history.contiguous(), new_history)
    return q, new_history
