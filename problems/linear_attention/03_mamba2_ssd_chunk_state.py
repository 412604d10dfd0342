"""Mamba-2 SSD chunk state (Mamba-2 2.7B: 80 heads of head_dim 64, d_state 128, one B group, chunk 256): for every (batch, chunk, head) the state the chunk leaves behind, states[b, c, h, p, n] = sum_l x[b, c*CS + l, h, p] * B[b, c*CS + l, g(h), n] * dt[b, h, c, l] * exp(dA_cumsum[b, h, c, CS-1] - dA_cumsum[b, h, c, l]), returned in fp32 (BATCH, NCHUNKS, NHEADS, HEADDIM, DSTATE)."""
import torch

BATCH = 4
SEQLEN = 4096
NHEADS = 80        # Mamba-2 2.7B: d_inner 5120 / headdim 64
HEADDIM = 64
NGROUPS = 1        # B/C groups (ngroups)
DSTATE = 128       # d_state
CHUNK = 256        # chunk_size


@torch.no_grad()
def reference(x: torch.Tensor, B: torch.Tensor, dt: torch.Tensor, dA_cumsum: torch.Tensor):
    # x: (BATCH, SEQLEN, NHEADS, HEADDIM) bf16; B: (BATCH, SEQLEN, NGROUPS, DSTATE) bf16;
    # dt (after softplus), dA_cumsum (within-chunk cumulative sum of dt * A): (BATCH, NHEADS, NCHUNKS, CHUNK) fp32.
    # Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if dt.dtype == torch.float64 else torch.float32
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    nchunks, chunk = dt.shape[2], dt.shape[3]
    w = torch.exp(dA_cumsum.to(acc)[..., -1:] - dA_cumsum.to(acc)) * dt.to(acc)       # (b, h, c, l) decay * dt
    xc = x.to(acc).reshape(batch, nchunks, chunk, nheads, headdim)
    bc = B.to(acc).reshape(batch, nchunks, chunk, ngroups, dstate).repeat_interleave(nheads // ngroups, dim=3)
    xw = xc * w.permute(0, 2, 3, 1)[..., None]                                           # (b, c, l, h, p)
    return torch.einsum("bclhp,bclhn->bchpn", xw, bc)


def make_inputs():
    nchunks = SEQLEN // CHUNK
    x = torch.randn(BATCH, SEQLEN, NHEADS, HEADDIM, dtype=torch.bfloat16)
    B = torch.randn(BATCH, SEQLEN, NGROUPS, DSTATE, dtype=torch.bfloat16)
    # dt = softplus(raw + dt_bias) around Mamba-2's init range [0.001, 0.1]; A = -exp(A_log), A in [-16, -1].
    dt = torch.nn.functional.softplus(0.5 * torch.randn(BATCH, NHEADS, nchunks, CHUNK) - 4.5)
    A = -torch.exp(torch.rand(NHEADS) * 2.772588722239781)
    dA_cumsum = torch.cumsum(dt * A[None, :, None, None], dim=-1)
    return [x, B, dt, dA_cumsum]
