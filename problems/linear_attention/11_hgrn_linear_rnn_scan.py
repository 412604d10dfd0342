"""Gated elementwise linear recurrence over a packed ragged batch (HGRN's lower-bounded forget gate, at the 4096 recurrence width of RecurrentGemma-9B's RG-LRU): per channel d, f_t = lb[d] + (1 - lb[d]) * sigmoid(f_logit_t), h_t = f_t * h_{t-1} + (1 - f_t) * x_t, where the state restarts from h0[b] at each sequence start given by cu_seqlens; returns (h (TOTAL_TOKENS, DIM) bf16, each sequence's final state (BATCH, DIM) fp32)."""
import torch

TOTAL_TOKENS = 16384  # tokens of the packed prefill batch
BATCH = 8             # sequences; ragged lengths that sum to TOTAL_TOKENS
DIM = 4096            # recurrence width (RecurrentGemma-9B lru_width)


@torch.no_grad()
def reference(x: torch.Tensor, f_logit: torch.Tensor, lower_bound: torch.Tensor, h0: torch.Tensor,
              cu_seqlens: torch.Tensor):
    # x, f_logit: (TOTAL_TOKENS, DIM) bf16; lower_bound: (DIM,) fp32 in [0, 1); h0: (BATCH, DIM) fp32;
    # cu_seqlens: (BATCH + 1,) int32, sequence b owns tokens cu_seqlens[b] .. cu_seqlens[b + 1] - 1.
    # Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if h0.dtype == torch.float64 else torch.float32
    lb = lower_bound.to(acc)
    f = lb + (1 - lb) * torch.sigmoid(f_logit.to(acc))
    xf = x.to(acc)
    total = x.shape[0]
    starts = cu_seqlens[:-1].long()
    lens = cu_seqlens[1:].long() - starts
    h = h0.to(acc).clone()
    y = torch.empty(total + 1, x.shape[1], dtype=acc, device=x.device)   # row `total` takes finished sequences
    for t in range(int(lens.max())):      # all sequences advance together; finished ones keep their state
        active = (lens > t)[:, None]
        idx = torch.clamp(starts + t, max=total - 1)
        ft = f[idx]
        h = torch.where(active, ft * h + (1 - ft) * xf[idx], h)
        y[torch.where(lens > t, starts + t, total)] = h
    y = y[:total]
    return y.to(x.dtype), h


def make_inputs():
    x = torch.randn(TOTAL_TOKENS, DIM).to(torch.bfloat16)
    f_logit = (2.0 * torch.randn(TOTAL_TOKENS, DIM)).to(torch.bfloat16)
    lower_bound = 0.9 * torch.rand(DIM)            # HGRN's per-layer, per-channel forget-gate floor
    h0 = torch.randn(BATCH, DIM)
    # BATCH - 1 distinct cut points in 1 .. TOTAL_TOKENS - 1: every sequence has at least one token.
    cuts = torch.randperm(TOTAL_TOKENS - 1)[:BATCH - 1].sort().values + 1
    cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.long), cuts,
                            torch.full((1,), TOTAL_TOKENS, dtype=torch.long)]).to(torch.int32)
    return [x, f_logit, lower_bound, h0, cu_seqlens]
