"""TIRx (sm_90a) solution in three kernels of one module; fp32 arithmetic, fp64 accumulation over tokens.
rows: one CTA of 256 threads per token row; with xhat = (x - mean) * rstd from the saved statistics and
g = dy * weight, one pass sums g and g * xhat (two CTA-wide sums, each on its own shared scratch) and a second
pass writes dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
partials: grid (hidden / 256, token chunks of 64); each thread owns one column and sums the fp32 terms dy * xhat
and dy over its chunk's tokens in fp64 (consecutive threads read consecutive columns: coalesced), writing
partial[chunk, column]; fp64 because a long fp32 sum over tokens drifts past the fp32 tolerance.
final: one thread per column sums the chunk partials in fp64 and rounds dweight and dbias once to fp32 (fixed
order: deterministic, no atomics)."""
import torch
import tvm
from tvm.script import tirx as T

THREADS = 256
NUM_WARPS = THREADS // 32
TOKEN_CHUNK = 64
_compiled = {}


def _build(tokens: int, hidden: int):
    iters = hidden // THREADS
    col_blocks = hidden // THREADS
    chunks = (tokens + TOKEN_CHUNK - 1) // TOKEN_CHUNK

    @T.prim_func
    def rows(dy_ptr: T.handle, x_ptr: T.handle, m_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle,
             dx_ptr: T.handle):
        DY = T.match_buffer(dy_ptr, (tokens, hidden), "bfloat16")
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        MEAN = T.match_buffer(m_ptr, (tokens,), "float32")
        RSTD = T.match_buffer(r_ptr, (tokens,), "float32")
        W = T.match_buffer(w_ptr, (hidden,), "bfloat16")
        DX = T.match_buffer(dx_ptr, (tokens, hidden), "bfloat16")
        T.device_entry()
        row = T.cta_id([tokens])
        tx = T.thread_id([THREADS])
        scratch = T.alloc_shared((2 * NUM_WARPS,), "float32")
        acc = T.alloc_local((2,), "float32")  # 0: sum g, 1: sum g * xhat
        stat = T.alloc_local((4,), "float32")  # 0: mean, 1: rstd, 2: mean(g), 3: mean(g * xhat)
        stat[0] = MEAN[row]
        stat[1] = RSTD[row]
        acc[0] = T.float32(0)
        acc[1] = T.float32(0)
        for k in T.serial(iters):
            j = k * THREADS + tx
            g = T.Cast("float32", DY[row, j]) * T.Cast("float32", W[j])
            acc[0] = acc[0] + g
            acc[1] = acc[1] + g * ((T.Cast("float32", X[row, j]) - stat[0]) * stat[1])
        stat[2] = T.cuda.cta_sum(acc[0], NUM_WARPS, scratch.ptr_to([0])) / T.float32(hidden)
        stat[3] = T.cuda.cta_sum(acc[1], NUM_WARPS, scratch.ptr_to([NUM_WARPS])) / T.float32(hidden)
        for k in T.serial(iters):
            j = k * THREADS + tx
            g = T.Cast("float32", DY[row, j]) * T.Cast("float32", W[j])
            xhat = (T.Cast("float32", X[row, j]) - stat[0]) * stat[1]
            DX[row, j] = T.Cast("bfloat16", stat[1] * (g - stat[2] - xhat * stat[3]))

    @T.prim_func
    def partials(dy_ptr: T.handle, x_ptr: T.handle, m_ptr: T.handle, r_ptr: T.handle, pw_ptr: T.handle,
                 pb_ptr: T.handle):
        DY = T.match_buffer(dy_ptr, (tokens, hidden), "bfloat16")
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        MEAN = T.match_buffer(m_ptr, (tokens,), "float32")
        RSTD = T.match_buffer(r_ptr, (tokens,), "float32")
        PW = T.match_buffer(pw_ptr, (chunks, hidden), "float64")
        PB = T.match_buffer(pb_ptr, (chunks, hidden), "float64")
        T.device_entry()
        cb, c = T.cta_id([col_blocks, chunks])
        tx = T.thread_id([THREADS])
        acc = T.alloc_local((2,), "float64")
        acc[0] = T.float64(0)
        acc[1] = T.float64(0)
        for t in T.serial(TOKEN_CHUNK):
            if c * TOKEN_CHUNK + t < tokens:
                tok = c * TOKEN_CHUNK + t
                j = cb * THREADS + tx
                dyv = T.Cast("float32", DY[tok, j])
                acc[0] = acc[0] + T.Cast("float64", dyv * ((T.Cast("float32", X[tok, j]) - MEAN[tok]) * RSTD[tok]))
                acc[1] = acc[1] + T.Cast("float64", dyv)
        PW[c, cb * THREADS + tx] = acc[0]
        PB[c, cb * THREADS + tx] = acc[1]

    @T.prim_func
    def final(pw_ptr: T.handle, pb_ptr: T.handle, dw_ptr: T.handle, db_ptr: T.handle):
        PW = T.match_buffer(pw_ptr, (chunks, hidden), "float64")
        PB = T.match_buffer(pb_ptr, (chunks, hidden), "float64")
        DW = T.match_buffer(dw_ptr, (hidden,), "float32")
        DB = T.match_buffer(db_ptr, (hidden,), "float32")
        T.device_entry()
        cb = T.cta_id([col_blocks])
        tx = T.thread_id([THREADS])
        acc = T.alloc_local((2,), "float64")
        acc[0] = T.float64(0)
        acc[1] = T.float64(0)
        for c in T.serial(chunks):
            acc[0] = acc[0] + PW[c, cb * THREADS + tx]
            acc[1] = acc[1] + PB[c, cb * THREADS + tx]
        DW[cb * THREADS + tx] = T.Cast("float32", acc[0])
        DB[cb * THREADS + tx] = T.Cast("float32", acc[1])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    exe = tvm.compile(tvm.IRModule({"rows": rows, "partials": partials, "final": final}), target=target,
                      tir_pipeline="tirx")
    return exe["rows"], exe["partials"], exe["final"], chunks


def solve(dy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    if dy.dtype != torch.bfloat16 or x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 dy, x and weight")
    if mean.dtype != torch.float32 or rstd.dtype != torch.float32:
        raise ValueError("expects float32 mean and rstd")
    if dy.shape != x.shape or mean.shape != (tokens,) or rstd.shape != (tokens,) or weight.shape != (hidden,):
        raise ValueError("shape mismatch among dy, x, mean, rstd, weight")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    key = (tokens, hidden)
    if key not in _compiled:
        _compiled[key] = _build(tokens, hidden)
    rows, partials, final, chunks = _compiled[key]
    dy = dy.contiguous()
    x = x.contiguous()
    mean = mean.contiguous()
    rstd = rstd.contiguous()
    dx = torch.empty_like(x)
    pw = torch.empty(chunks, hidden, dtype=torch.float64, device=x.device)
    pb = torch.empty(chunks, hidden, dtype=torch.float64, device=x.device)
    dweight = torch.empty(hidden, dtype=torch.float32, device=x.device)
    dbias = torch.empty(hidden, dtype=torch.float32, device=x.device)
    rows(dy, x, mean, rstd, weight.contiguous(), dx)
    partials(dy, x, mean, rstd, pw, pb)
    final(pw, pb, dweight, dbias)
    return dx, dweight, dbias
