"""GPU (sm_90a) TIRx solution: one CTA per (head, batch), one thread per state column j (HEAD_V_DIM threads), the
column's K entries of the recomputed fp32 state in registers (from h0). Each step thread j forms (S^T k)[j] over
its column (k reads are warp-uniform broadcasts), the correction u = beta (v[j] - (S^T k)[j]) and applies
S[i, j] += k[i] u. dq_t[i] = scale * sum_j S[i, j] do[j] is a reduction across the columns: per row i every warp
sums its 32 partials with shuffles and lane 0 stores the warp's sum in shared memory; after a barrier thread i adds
the warps' sums and writes dq_t[i]. No state is written to memory."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, seqlen: int, heads: int, dk: int, dv: int):
    scale = dk ** -0.5
    warps = dv // 32
    out_iters = (dk + dv - 1) // dv

    @T.prim_func
    def delta_bwd_dq(k_ptr: T.handle, v_ptr: T.handle, b_ptr: T.handle, h0_ptr: T.handle, do_ptr: T.handle,
                     dq_ptr: T.handle):
        K = T.match_buffer(k_ptr, (batch, seqlen, heads, dk), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, seqlen, heads, dv), "bfloat16")
        BETA = T.match_buffer(b_ptr, (batch, seqlen, heads), "bfloat16")
        H0 = T.match_buffer(h0_ptr, (batch, heads, dk, dv), "float32")
        DO = T.match_buffer(do_ptr, (batch, seqlen, heads, dv), "bfloat16")
        DQ = T.match_buffer(dq_ptr, (batch, seqlen, heads, dk), "bfloat16")
        T.device_entry()
        h, b = T.cta_id([heads, batch])
        j = T.thread_id([dv])
        part = T.alloc_shared((warps * dk,), "float32")
        col = T.alloc_local((dk,), "float32")
        sc = T.alloc_local((2,), "float32")   # 0: (S^T k)[j], then the correction u; 1: a row partial / dq sum
        warp = j // 32
        lane = j % 32
        for i in T.unroll(dk):
            col[i] = H0[b, h, i, j]
        for t in T.serial(seqlen):
            sc[0] = T.float32(0)
            for i in T.unroll(dk):
                sc[0] = sc[0] + col[i] * T.Cast("float32", K[b, t, h, i])
            sc[0] = T.Cast("float32", BETA[b, t, h]) * (T.Cast("float32", V[b, t, h, j]) - sc[0])
            doj = T.Cast("float32", DO[b, t, h, j])
            T.cuda.cta_sync()                   # the previous step's readers of part are done
            for i in T.unroll(dk):
                col[i] = col[i] + T.Cast("float32", K[b, t, h, i]) * sc[0]
                sc[1] = T.cuda.warp_sum(col[i] * doj)
                if lane == 0:
                    part[warp * dk + i] = sc[1]
            T.cuda.cta_sync()
            for it in T.unroll(out_iters):
                i = it * dv + j
                if i < dk:
                    sc[1] = T.float32(0)
                    for w in T.unroll(warps):
                        sc[1] = sc[1] + part[w * dk + i]
                    DQ[b, t, h, i] = T.Cast("bfloat16", sc[1] * T.float32(scale))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": delta_bwd_dq})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


def solve(k, v, beta, h0, do):
    batch, seqlen, heads, dk = k.shape
    dv = v.shape[-1]
    if any(t.dtype != torch.bfloat16 for t in (k, v, beta, do)) or h0.dtype != torch.float32:
        raise ValueError("k, v, beta and do must be bfloat16, h0 float32")
    if tuple(v.shape) != (batch, seqlen, heads, dv) or tuple(do.shape) != tuple(v.shape):
        raise ValueError("v and do must be (BATCH, SEQLEN, NUM_HEADS, HEAD_V_DIM)")
    if tuple(beta.shape) != (batch, seqlen, heads) or tuple(h0.shape) != (batch, heads, dk, dv):
        raise ValueError("beta must be (BATCH, SEQLEN, NUM_HEADS) and h0 (BATCH, NUM_HEADS, K, V)")
    if dv % 32 != 0 or dv > 1024 or dk > 128:
        raise ValueError("HEAD_V_DIM must be a multiple of 32 (<= 1024, one thread per column), HEAD_K_DIM <= 128")
    key = (batch, seqlen, heads, dk, dv)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    dq = torch.empty((batch, seqlen, heads, dk), dtype=k.dtype, device=k.device)
    _compiled[key](k.contiguous(), v.contiguous(), beta.contiguous(), h0.contiguous(), do.contiguous(), dq)
    return dq
