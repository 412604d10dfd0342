"""SwiGLU backward (Llama-3.1-8B MLP training step, intermediate 14336): given x = [gate | up] and d_out of out = silu(gate) * up, return d_x = [d_out * up * silu'(gate) | d_out * silu(gate)]."""
import torch

TOKENS = 8192
INTERMEDIATE = 14336


@torch.no_grad()
def reference(x: torch.Tensor, d_out: torch.Tensor):
    # x holds [gate | up] along the last dimension (the fused gate_up projection's output); d_out is the gradient of
    # out = silu(gate) * up. With s = sigmoid(gate): silu(gate) = gate * s, silu'(gate) = s * (1 + gate * (1 - s)).
    # Computed in float32 (float64 for the judge's anchor), rounded once to the activation dtype.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    d = x.shape[-1] // 2
    gate = x[..., :d].to(acc)
    up = x[..., d:].to(acc)
    g_out = d_out.to(acc)
    s = torch.sigmoid(gate)
    d_gate = g_out * up * s * (1.0 + gate * (1.0 - s))
    d_up = g_out * gate * s
    return torch.cat([d_gate, d_up], dim=-1).to(x.dtype)


def make_inputs():
    x = torch.randn(TOKENS, 2 * INTERMEDIATE, dtype=torch.bfloat16)
    d_out = torch.randn(TOKENS, INTERMEDIATE, dtype=torch.bfloat16)
    return [x, d_out]
