"""RWKV-6 (Finch) wkv forward over a prefill sequence (RWKV-6 World 7B: 64 heads of head size 64), per (batch, head) with a (K, V) fp32 matrix state S starting at state0: o_t[j] = sum_i r_t[i] * (S[i, j] + u[i] * k_t[i] * v_t[j]), then S <- diag(exp(w_t)) S + k_t v_t^T, where w_t < 0 is the data-dependent per-channel log decay and u the per-head bonus; returns (o (BATCH, SEQLEN, NUM_HEADS, HEAD_SIZE) bf16, final state (BATCH, NUM_HEADS, HEAD_SIZE, HEAD_SIZE) fp32)."""
import torch

BATCH = 4
SEQLEN = 2048        # prefill tokens per sequence
NUM_HEADS = 64       # RWKV-6 World 7B: hidden 4096 / head size 64
HEAD_SIZE = 64       # key and value head size


@torch.no_grad()
def reference(r: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor, u: torch.Tensor,
              state0: torch.Tensor):
    # r, k, v: (B, T, H, K) bf16; w: (B, T, H, K) fp32 log decay (< 0); u: (H, K) bf16 bonus;
    # state0: (B, H, K, V) fp32. Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if state0.dtype == torch.float64 else torch.float32
    batch, seqlen, heads, _ = r.shape
    dv = v.shape[-1]
    rf, kf, vf = r.to(acc), k.to(acc), v.to(acc)
    decay = torch.exp(w.to(acc))
    uf = u.to(acc)[None, :, :, None]                                   # (1, H, K, 1)
    s = state0.to(acc).clone()
    o = torch.empty(batch, seqlen, heads, dv, dtype=acc, device=r.device)
    for t in range(seqlen):
        kv = kf[:, t, :, :, None] * vf[:, t, :, None, :]               # (B, H, K, V)
        o[:, t] = torch.einsum("bhk,bhkv->bhv", rf[:, t], s + uf * kv)
        s = s * decay[:, t, :, :, None] + kv
    return o.to(v.dtype), s.to(state0.dtype)


def make_inputs():
    B, L, H, D = BATCH, SEQLEN, NUM_HEADS, HEAD_SIZE
    r = torch.randn(B, L, H, D).to(torch.bfloat16)
    k = (torch.randn(B, L, H, D) * D ** -0.5).to(torch.bfloat16)
    v = torch.randn(B, L, H, D).to(torch.bfloat16)
    # RWKV-6 decay: w = -exp(time_decay + lora(x)), so exp(w) lies in (0, 1); here mostly 0.5 .. 0.99
    w = -torch.exp(torch.randn(B, L, H, D) - 1.5)
    u = (0.5 * torch.randn(H, D)).to(torch.bfloat16)
    state0 = 0.5 * torch.randn(B, H, D, D)
    return [r, k, v, w, u, state0]
