"""Decode-time gated MLP up-projection (Llama-3.2-1B: hidden 2048, intermediate 8192; a batch of 8 decode tokens): y = silu(x @ W_gate^T) * (x @ W_up^T) with the fused gate_up weight [W_gate; W_up], bf16 weights, fp32 accumulation."""
import torch
import torch.nn.functional as F

BATCH = 8
HIDDEN = 2048
INTERMEDIATE = 8192


@torch.no_grad()
def reference(x: torch.Tensor, w_gate_up: torch.Tensor):
    # x: (batch, hidden); w_gate_up: (2 * intermediate, hidden), rows [0, I) the gate projection and [I, 2I) the up
    # projection (vLLM's merged gate_up_proj). Both GEMVs accumulate in float32 (float64 for the judge's anchor);
    # silu and the product stay in that precision, rounded once to the activation dtype.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    d = w_gate_up.shape[0] // 2
    h = x.to(acc) @ w_gate_up.to(acc).t()
    return (F.silu(h[:, :d]) * h[:, d:]).to(x.dtype)


def make_inputs():
    x = torch.randn(BATCH, HIDDEN, dtype=torch.bfloat16)
    w_gate_up = (0.02 * torch.randn(2 * INTERMEDIATE, HIDDEN)).to(torch.bfloat16)
    return [x, w_gate_up]
