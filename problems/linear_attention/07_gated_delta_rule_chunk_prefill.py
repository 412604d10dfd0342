"""Chunked prefill of the gated delta rule (Qwen3-Next-80B-A3B Gated DeltaNet: 16 key heads, 32 value heads, head dims 128, chunk 64), per (batch, value head h, key head h // 2) from the cached fp32 state S (DK, DV): the recurrence S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - exp(g_t) S_{t-1}^T k_t))^T, o_t = DK**-0.5 S_t^T q_t evaluated chunk by chunk in WY form: with G the within-chunk cumsum of g, U = (I + L)^-1 diag(beta) (V - diag(e^G) K S) where L = strict_tril(diag(beta) (K K^T * e^(G_i - G_j))) (a unit lower-triangular solve), O = DK**-0.5 (diag(e^G) Q S + (Q K^T * causal e^(G_i - G_j)) U), S <- e^(G_last) S + K^T diag(e^(G_last - G)) U; returns (o (BATCH, SEQLEN, NUM_V_HEADS, HEAD_V_DIM) bf16, final state (BATCH, NUM_V_HEADS, HEAD_K_DIM, HEAD_V_DIM) fp32)."""
import torch

BATCH = 2
SEQLEN = 4096
NUM_K_HEADS = 16     # Qwen3-Next-80B-A3B linear_num_key_heads
NUM_V_HEADS = 32     # linear_num_value_heads
HEAD_K_DIM = 128     # linear_key_head_dim
HEAD_V_DIM = 128     # linear_value_head_dim
CHUNK = 64           # chunk size of the chunked (WY) kernels


@torch.no_grad()
def reference(q, k, v, g, beta, initial_state):
    # q, k: (B, T, HK, DK) bf16, L2-normalised; v: (B, T, HV, DV) bf16; g (log decay, < 0): (B, T, HV) fp32;
    # beta: (B, T, HV) bf16; initial_state: (B, HV, DK, DV) fp32. Math in float32 (float64 for the judge's anchor).
    acc = torch.float64 if initial_state.dtype == torch.float64 else torch.float32
    batch, seqlen, hk, dk = q.shape
    hv, dv = v.shape[2], v.shape[3]
    rep, c = hv // hk, CHUNK
    n = seqlen // c
    scale = dk ** -0.5

    def chunks(x, width):  # (B, T, H, width) -> (B, H, N, C, width)
        return x.to(acc).transpose(1, 2).reshape(batch, hv, n, c, width)

    qf = chunks(q.repeat_interleave(rep, dim=2), dk)
    kf = chunks(k.repeat_interleave(rep, dim=2), dk)
    vf = chunks(v, dv)
    G = g.to(acc).transpose(1, 2).reshape(batch, hv, n, c).cumsum(dim=-1)
    bt = beta.to(acc).transpose(1, 2).reshape(batch, hv, n, c)
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    strict = causal.tril(-1)
    eye = torch.eye(c, dtype=acc, device=q.device)
    S = initial_state.to(acc).clone()
    outs = []
    for i in range(n):
        Q, K, V, Gi, Bi = qf[:, :, i], kf[:, :, i], vf[:, :, i], G[:, :, i], bt[:, :, i]
        diff = (Gi[..., :, None] - Gi[..., None, :]).masked_fill(~causal, float("-inf"))
        decay = torch.exp(diff)                                              # e^(G_i - G_j), j <= i, else 0
        L = (Bi[..., :, None] * decay * (K @ K.transpose(-1, -2))).masked_fill(~strict, 0.0)
        R = Bi[..., None] * (V - torch.exp(Gi)[..., None] * (K @ S))
        U = torch.linalg.solve_triangular(eye + L, R, upper=False, unitriangular=True)
        outs.append(scale * (torch.exp(Gi)[..., None] * (Q @ S) + (decay * (Q @ K.transpose(-1, -2))) @ U))
        last = Gi[..., -1:]
        S = torch.exp(last)[..., None] * S + (K * torch.exp(last - Gi)[..., None]).transpose(-1, -2) @ U
    o = torch.stack(outs, dim=2).reshape(batch, hv, seqlen, dv).transpose(1, 2)
    return o.to(v.dtype), S.to(initial_state.dtype)


def make_inputs():
    B, T, HK, HV, DK, DV = BATCH, SEQLEN, NUM_K_HEADS, NUM_V_HEADS, HEAD_K_DIM, HEAD_V_DIM
    q = torch.nn.functional.normalize(torch.randn(B, T, HK, DK), dim=-1).to(torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(B, T, HK, DK), dim=-1).to(torch.bfloat16)
    v = torch.randn(B, T, HV, DV, dtype=torch.bfloat16)
    # g = -exp(A_log) * softplus(a + dt_bias): per-token log decays, mostly mild (exp(g) ~ 0.85-1), some sharp
    g = -torch.exp(0.5 * torch.randn(HV)) * torch.nn.functional.softplus(torch.randn(B, T, HV) - 2.0)
    beta = torch.sigmoid(torch.randn(B, T, HV)).to(torch.bfloat16)
    initial_state = 0.5 * torch.randn(B, HV, DK, DV)           # cached state of the prefix (prefix caching)
    return [q, k, v, g, beta, initial_state]
