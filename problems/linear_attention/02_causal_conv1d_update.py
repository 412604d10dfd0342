"""Causal depthwise conv1d decode update with a slot-indexed state cache (the short convolution of Qwen3-Next Gated DeltaNet / Mamba, width 4, no bias, SiLU): for batch row b and cache slot s = slots[b], window = [conv_state[s] (WIDTH-1 past inputs, oldest first), x[b]]; y[b, d] = silu(sum_w window[w, d] * weight[d, w]); conv_state[s] <- window[1:] in place; return y."""
import torch

BATCH = 256
NUM_SLOTS = 1024     # cache lines of the serving engine's state pool
DIM = 8192           # Qwen3-Next-80B-A3B conv dim: 2 * 16 * 128 (q, k) + 32 * 128 (v)
WIDTH = 4            # linear_conv_kernel_dim


@torch.no_grad()
def reference(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, slots: torch.Tensor):
    # x: (BATCH, DIM); conv_state: (NUM_SLOTS, WIDTH - 1, DIM), updated in place; weight: (DIM, WIDTH);
    # slots: (BATCH,) int32, distinct. Math in float32 (float64 when the judge computes its anchor).
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    idx = slots.long()
    window = torch.cat([conv_state[idx], x[:, None, :]], dim=1)          # (BATCH, WIDTH, DIM)
    y = (window.to(acc) * weight.to(acc).t()[None]).sum(dim=1)
    y = y * torch.sigmoid(y)
    conv_state[idx] = window[:, 1:]
    return y.to(x.dtype)


def make_inputs():
    x = torch.randn(BATCH, DIM, dtype=torch.bfloat16)
    conv_state = torch.randn(NUM_SLOTS, WIDTH - 1, DIM, dtype=torch.bfloat16)
    weight = (torch.randn(DIM, WIDTH) / WIDTH ** 0.5).to(torch.bfloat16)
    slots = torch.randperm(NUM_SLOTS)[:BATCH].to(torch.int32)
    return [x, conv_state, weight, slots]
