"""GPU (sm_90a) TIRx solution: one CTA of HEAD_V_DIM threads per (query row n, head, batch). Phase 1: the threads
split the keys m <= n; each computes s[m] = (q_n . k_m) * DK**-0.5 * gamma_h^(n - m) (decay as exp((n - m) *
log(gamma_h)) in float64, gamma_h = 1 - 2^-(5 + h); TVM builds with --use_fast_math) into shared memory. Phase 2:
thread j accumulates o_n[j] = sum_m s[m] v_m[j] in float32 (v rows read coalesced) and rounds it to bf16."""
import torch
import tvm
from tvm.script import tirx as T

_compiled = {}


def _build(batch: int, heads: int, seqlen: int, dk: int, dv: int):
    scale = dk ** -0.5

    @T.prim_func
    def retention(q_ptr: T.handle, k_ptr: T.handle, v_ptr: T.handle, o_ptr: T.handle):
        Q = T.match_buffer(q_ptr, (batch, heads, seqlen, dk), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, heads, seqlen, dk), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, heads, seqlen, dv), "bfloat16")
        O = T.match_buffer(o_ptr, (batch, heads, seqlen, dv), "bfloat16")
        T.device_entry()
        n, h, b = T.cta_id([seqlen, heads, batch])
        tx = T.thread_id([dv])
        s = T.alloc_shared((seqlen,), "float32")
        dot = T.alloc_local((1,), "float32")
        o = T.alloc_local((1,), "float32")
        log_gamma = T.log(T.float64(1) - T.float64(1) / T.Cast("float64", T.shift_left(T.int64(1),
                                                                                       T.Cast("int64", h + 5))))
        for i in T.serial((n + dv) // dv):          # keys m = i * dv + tx, m <= n
            m = i * dv + tx
            if m <= n:
                dot[0] = T.float32(0)
                for d in T.serial(dk):
                    dot[0] = dot[0] + T.Cast("float32", Q[b, h, n, d]) * T.Cast("float32", K[b, h, m, d])
                s[m] = dot[0] * T.float32(scale) * T.Cast("float32", T.exp(T.Cast("float64", n - m) * log_gamma))
        T.cuda.cta_sync()
        o[0] = T.float32(0)
        for m in T.serial(n + 1):
            o[0] = o[0] + s[m] * T.Cast("float32", V[b, h, m, tx])
        O[b, h, n, tx] = T.Cast("bfloat16", o[0])

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    module = tvm.IRModule({"main": retention})
    return tvm.compile(module, target=target, tir_pipeline="tirx")["main"]


def solve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    batch, heads, seqlen, dk = q.shape
    dv = v.shape[3]
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16 or v.dtype != torch.bfloat16:
        raise ValueError("expects bfloat16 q, k, v")
    if k.shape != q.shape or tuple(v.shape[:3]) != (batch, heads, seqlen):
        raise ValueError("expects q, k (B, H, L, DK) and v (B, H, L, DV)")
    if dv % 32 != 0 or dv > 1024 or seqlen * 4 > 48 * 1024:
        raise ValueError("HEAD_V_DIM must be a multiple of 32 (<= 1024, one thread per column); SEQLEN <= 12288")
    key = (batch, heads, seqlen, dk, dv)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    out = torch.empty((batch, heads, seqlen, dv), dtype=torch.bfloat16, device=q.device)
    _compiled[key](q.contiguous(), k.contiguous(), v.contiguous(), out)
    return out
