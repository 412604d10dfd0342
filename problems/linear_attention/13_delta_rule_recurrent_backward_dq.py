"""The dq part of the (ungated) delta rule backward in recurrent form (DeltaNet 1.3B: hidden 2048, 16 heads of head dim 128, L2-normalised keys): per (batch, head) recompute the fp32 states from h0, S_t = S_{t-1} + k_t (beta_t * (v_t - S_{t-1}^T k_t))^T, and return dq_t = scale * S_t do_t with scale = HEAD_K_DIM**-0.5, the gradient of o_t = scale * S_t^T q_t (q itself is not needed); returns dq (BATCH, SEQLEN, NUM_HEADS, HEAD_K_DIM) bf16."""
import torch

BATCH = 16
SEQLEN = 512         # short training sequences
NUM_HEADS = 16       # DeltaNet-1.3B: hidden 2048, 16 heads
HEAD_K_DIM = 128
HEAD_V_DIM = 128


@torch.no_grad()
def reference(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, h0: torch.Tensor, do: torch.Tensor):
    # k: (B, T, H, K) bf16, L2-normalised; v, do: (B, T, H, V) bf16; beta: (B, T, H) bf16 in (0, 1);
    # h0: (B, H, K, V) fp32 initial state. Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if h0.dtype == torch.float64 else torch.float32
    batch, seqlen, heads, dk = k.shape
    scale = dk ** -0.5
    kf, vf, bf, dof = k.to(acc), v.to(acc), beta.to(acc), do.to(acc)
    s = h0.to(acc).clone()
    dq = torch.empty(batch, seqlen, heads, dk, dtype=acc, device=k.device)
    for t in range(seqlen):
        kt = kf[:, t]                                                   # (B, H, K)
        kv = torch.einsum("bhk,bhkv->bhv", kt, s)                       # S^T k
        u = bf[:, t, :, None] * (vf[:, t] - kv)                         # delta-rule correction
        s = s + kt[:, :, :, None] * u[:, :, None, :]
        dq[:, t] = torch.einsum("bhkv,bhv->bhk", s, dof[:, t]) * scale
    return dq.to(k.dtype)


def make_inputs():
    B, L, H, DK, DV = BATCH, SEQLEN, NUM_HEADS, HEAD_K_DIM, HEAD_V_DIM
    k = torch.nn.functional.normalize(torch.randn(B, L, H, DK), dim=-1).to(torch.bfloat16)
    v = torch.randn(B, L, H, DV).to(torch.bfloat16)
    beta = torch.sigmoid(torch.randn(B, L, H)).to(torch.bfloat16)
    h0 = 0.5 * torch.randn(B, H, DK, DV)
    do = torch.randn(B, L, H, DV).to(torch.bfloat16)
    return [k, v, beta, h0, do]
