"""Causal depthwise conv1d (width 4, with bias) + SiLU over a packed ragged prefill batch (the short convolution of Mamba-2 2.7B: conv dim d_inner 5120 + 2 * d_state 128 = 5376), with fresh (zero) initial states: y[t, d] = silu(bias[d] + sum_w x[t - (WIDTH-1) + w, d] * weight[d, w]), where taps before the token's sequence start (from cu_seqlens) read 0, so the window never crosses a sequence boundary; also returns each sequence's final conv state, its last WIDTH-1 inputs (zero-padded on the left when it is shorter); returns (y (TOTAL_TOKENS, DIM) bf16, conv_states (BATCH, WIDTH-1, DIM) bf16)."""
import torch

TOTAL_TOKENS = 16384  # tokens of the packed prefill batch
BATCH = 16            # sequences; ragged lengths that sum to TOTAL_TOKENS
DIM = 5376            # Mamba-2 2.7B conv channels: d_inner 5120 + 2 * ngroups 1 * d_state 128
WIDTH = 4             # d_conv


@torch.no_grad()
def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, cu_seqlens: torch.Tensor):
    # x: (TOTAL_TOKENS, DIM) bf16, sequences packed one after another; weight: (DIM, WIDTH) bf16; bias: (DIM,)
    # bf16; cu_seqlens: (BATCH + 1,) int32. Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    total, dim = x.shape
    width = weight.shape[1]
    wf, bf = weight.to(acc), bias.to(acc)
    y = torch.empty(total, dim, dtype=acc, device=x.device)
    states = torch.empty(len(cu_seqlens) - 1, width - 1, dim, dtype=x.dtype, device=x.device)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        s, e = bounds[b], bounds[b + 1]
        n = e - s
        padded = torch.cat([torch.zeros(width - 1, dim, dtype=x.dtype, device=x.device), x[s:e]])  # (n + W-1, D)
        pf = padded.to(acc)
        out = bf[None, :].expand(n, dim).clone()
        for w in range(width):
            out = out + pf[w:w + n] * wf[None, :, w]
        y[s:e] = out * torch.sigmoid(out)
        states[b] = padded[n:]                    # the last WIDTH-1 rows of the padded window
    return y.to(x.dtype), states


def make_inputs():
    x = torch.randn(TOTAL_TOKENS, DIM).to(torch.bfloat16)
    weight = (torch.randn(DIM, WIDTH) / WIDTH ** 0.5).to(torch.bfloat16)
    bias = (0.1 * torch.randn(DIM)).to(torch.bfloat16)
    # the first sequence is a 2-token prompt (shorter than the window); the other BATCH - 2 cut points are distinct
    # in 3 .. TOTAL_TOKENS - 1, so every sequence has at least one token
    cuts = torch.randperm(TOTAL_TOKENS - 3)[:BATCH - 2].sort().values + 3
    cu_seqlens = torch.cat([torch.tensor([0, 2], dtype=torch.long), cuts,
                            torch.full((1,), TOTAL_TOKENS, dtype=torch.long)]).to(torch.int32)
    return [x, weight, bias, cu_seqlens]
