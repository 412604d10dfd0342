"""Mamba-2 SSD chunk scan, the output stage (Mamba-2 2.7B: 80 heads of head_dim 64, d_state 128, one B/C group, chunk 256): per (batch, chunk c, head h) and position l of the chunk, y[l, p] = sum_{s <= l} (C_l . B_s) exp(dA_cumsum[l] - dA_cumsum[s]) dt[s] x[s, p] (intra-chunk, the segsum decay mask) + exp(dA_cumsum[l]) (C_l . states[c, h, p, :]) (the state carried into the chunk) + D[h] x[l, p]; returns y (BATCH, SEQLEN, NHEADS, HEADDIM) bf16."""
import torch

BATCH = 4
SEQLEN = 4096
NHEADS = 80        # Mamba-2 2.7B: d_inner 5120 / headdim 64
HEADDIM = 64
NGROUPS = 1        # B/C groups (ngroups)
DSTATE = 128       # d_state
CHUNK = 256        # chunk_size


@torch.no_grad()
def reference(x, B, C, dt, dA_cumsum, states, D):
    # x: (BATCH, SEQLEN, NHEADS, HEADDIM) bf16; B, C: (BATCH, SEQLEN, NGROUPS, DSTATE) bf16; dt (after softplus),
    # dA_cumsum (within-chunk cumsum of dt * A): (BATCH, NHEADS, NCHUNKS, CHUNK) fp32; states (the state entering
    # each chunk, after state passing): (BATCH, NCHUNKS, NHEADS, HEADDIM, DSTATE) fp32; D: (NHEADS,) fp32.
    # Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if dt.dtype == torch.float64 else torch.float32
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    nchunks, chunk = dt.shape[2], dt.shape[3]
    rep = nheads // ngroups
    xc = x.to(acc).reshape(batch, nchunks, chunk, nheads, headdim)
    bc = B.to(acc).reshape(batch, nchunks, chunk, ngroups, dstate)
    cc = C.to(acc).reshape(batch, nchunks, chunk, ngroups, dstate)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=x.device).tril()
    ys = []
    for c in range(nchunks):
        cb = torch.einsum("blgn,bsgn->bgls", cc[:, c], bc[:, c]).repeat_interleave(rep, dim=1)   # (b, h, l, s)
        da = dA_cumsum[:, :, c].to(acc)                                                            # (b, h, l)
        seg = (da[..., :, None] - da[..., None, :]).masked_fill(~causal, float("-inf"))
        w = cb * torch.exp(seg) * dt[:, :, c].to(acc)[..., None, :]
        intra = torch.einsum("bhls,bshp->blhp", w, xc[:, c])
        ch = cc[:, c].repeat_interleave(rep, dim=2)                                               # (b, l, h, n)
        inter = torch.einsum("blhn,bhpn->blhp", ch, states[:, c].to(acc)) * torch.exp(da).permute(0, 2, 1)[..., None]
        ys.append(intra + inter + D.to(acc)[:, None] * xc[:, c])
    return torch.stack(ys, dim=1).reshape(batch, seqlen, nheads, headdim).to(x.dtype)


def make_inputs():
    nchunks = SEQLEN // CHUNK
    x = torch.randn(BATCH, SEQLEN, NHEADS, HEADDIM, dtype=torch.bfloat16)
    B = torch.randn(BATCH, SEQLEN, NGROUPS, DSTATE, dtype=torch.bfloat16)
    C = torch.randn(BATCH, SEQLEN, NGROUPS, DSTATE, dtype=torch.bfloat16)
    # dt = softplus(raw + dt_bias) around Mamba-2's init range [0.001, 0.1]; A = -exp(A_log), A in [-16, -1].
    dt = torch.nn.functional.softplus(0.5 * torch.randn(BATCH, NHEADS, nchunks, CHUNK) - 4.5)
    A = -torch.exp(torch.rand(NHEADS) * 2.772588722239781)
    dA_cumsum = torch.cumsum(dt * A[None, :, None, None], dim=-1)
    states = 0.2 * torch.randn(BATCH, nchunks, NHEADS, HEADDIM, DSTATE)
    D = 1.0 + 0.1 * torch.randn(NHEADS)
    return [x, B, C, dt, dA_cumsum, states, D]
