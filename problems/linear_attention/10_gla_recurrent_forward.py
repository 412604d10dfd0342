"""Gated Linear Attention recurrent forward (GLA 340M as configured in flash-linear-attention: hidden 1024, 4 heads, expand_k 0.5, expand_v 1, so key head dim 128 and value head dim 256; gate_logit_normalizer 16), per (batch, head) from a zero fp32 state S (DK, DV): alpha_t = exp(logsigmoid(g_t) / 16) per key dim, S_t = diag(alpha_t) S_{t-1} + k_t v_t^T, o_t = (DK**-0.5 * q_t) S_t; the gate activation is part of the op; returns (o (BATCH, SEQLEN, NUM_HEADS, HEAD_V_DIM) bf16, final state (BATCH, NUM_HEADS, HEAD_K_DIM, HEAD_V_DIM) fp32)."""
import torch

BATCH = 8
SEQLEN = 2048
NUM_HEADS = 4        # GLA-340M: hidden 1024, 4 heads
HEAD_K_DIM = 128     # expand_k 0.5: key dim 512 over 4 heads
HEAD_V_DIM = 256     # expand_v 1: value dim 1024 over 4 heads
GATE_NORM = 16       # gate_logit_normalizer


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor):
    # q, k, g: (B, T, H, DK) bf16 (g: raw gate logits); v: (B, T, H, DV) bf16.
    # Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    batch, seqlen, heads, dk = q.shape
    dv = v.shape[-1]
    scale = dk ** -0.5
    qf, kf, vf = q.to(acc) * scale, k.to(acc), v.to(acc)
    alpha = torch.exp(torch.nn.functional.logsigmoid(g.to(acc)) / GATE_NORM)
    s = torch.zeros(batch, heads, dk, dv, dtype=acc, device=q.device)
    o = torch.empty(batch, seqlen, heads, dv, dtype=acc, device=q.device)
    for t in range(seqlen):
        s = s * alpha[:, t, :, :, None] + kf[:, t, :, :, None] * vf[:, t, :, None, :]
        o[:, t] = torch.einsum("bhk,bhkv->bhv", qf[:, t], s)
    return o.to(v.dtype), s                                            # the fp32 state (float64 anchor)


def make_inputs():
    B, L, H, DK, DV = BATCH, SEQLEN, NUM_HEADS, HEAD_K_DIM, HEAD_V_DIM
    q = torch.randn(B, L, H, DK).to(torch.bfloat16)
    k = torch.randn(B, L, H, DK).to(torch.bfloat16)
    v = torch.randn(B, L, H, DV).to(torch.bfloat16)
    g = torch.randn(B, L, H, DK).to(torch.bfloat16)   # gate logits from the low-rank gate projection
    return [q, k, v, g]
