"""One decode step of the gated delta rule (Qwen3-Next Gated DeltaNet), per (batch, value head): S <- exp(g) * S; S <- S + k (beta * (v - S^T k))^T; o = scale * S^T q with scale = DK**-0.5; the fp32 state (BATCH, HV, DK, DV) is updated in place, o (BATCH, HV, DV) is returned; q, k (already L2-normalized) have HK heads, value head h uses key head h // (HV // HK)."""
import torch

BATCH = 64
NUM_K_HEADS = 16     # Qwen3-Next-80B-A3B linear_num_key_heads
NUM_V_HEADS = 32     # linear_num_value_heads
HEAD_K_DIM = 128     # linear_key_head_dim
HEAD_V_DIM = 128     # linear_value_head_dim


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
              state: torch.Tensor):
    # q, k: (B, HK, DK); v: (B, HV, DV); g (log decay), beta: (B, HV); state: (B, HV, DK, DV), updated in place.
    # Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if state.dtype == torch.float64 else torch.float32
    rep = v.shape[1] // q.shape[1]
    scale = q.shape[-1] ** -0.5
    qf = q.to(acc).repeat_interleave(rep, dim=1)                      # (B, HV, DK)
    kf = k.to(acc).repeat_interleave(rep, dim=1)
    s = state.to(acc) * torch.exp(g.to(acc))[:, :, None, None]        # decay
    kv = torch.einsum("bhkv,bhk->bhv", s, kf)                         # S^T k
    u = beta.to(acc)[:, :, None] * (v.to(acc) - kv)                   # delta-rule correction
    s = s + kf[:, :, :, None] * u[:, :, None, :]                      # rank-1 update
    o = torch.einsum("bhkv,bhk->bhv", s, qf) * scale
    state.copy_(s.to(state.dtype))
    return o.to(v.dtype)


def make_inputs():
    B, HK, HV, DK, DV = BATCH, NUM_K_HEADS, NUM_V_HEADS, HEAD_K_DIM, HEAD_V_DIM
    q = torch.nn.functional.normalize(torch.randn(B, HK, DK), dim=-1).to(torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(B, HK, DK), dim=-1).to(torch.bfloat16)
    v = torch.randn(B, HV, DV, dtype=torch.bfloat16)
    g = -torch.nn.functional.softplus(torch.randn(B, HV))            # log decay < 0, float32 as in the model
    beta = torch.sigmoid(torch.randn(B, HV)).to(torch.bfloat16)
    state = 0.5 * torch.randn(B, HV, DK, DV)                          # float32 recurrent state
    return [q, k, v, g, beta, state]
