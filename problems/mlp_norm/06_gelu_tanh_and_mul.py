"""GeGLU activation with the tanh GELU (Gemma-2-9B MLP, prefill: hidden_activation gelu_pytorch_tanh, intermediate 14336), gate and up as two separate tensors: out = gelu_tanh(gate) * up."""
import torch
import torch.nn.functional as F

TOKENS = 4096
INTERMEDIATE = 14336


@torch.no_grad()
def reference(gate: torch.Tensor, up: torch.Tensor):
    # gelu_tanh(g) = 0.5 * g * (1 + tanh(sqrt(2 / pi) * (g + 0.044715 * g^3))), in float32 (float64 for the
    # judge's anchor), rounded once to the activation dtype. gate and up are the outputs of two separate
    # projections (gate_proj, up_proj), each its own contiguous tensor.
    acc = torch.float64 if gate.dtype == torch.float64 else torch.float32
    out = F.gelu(gate.to(acc), approximate="tanh") * up.to(acc)
    return out.to(gate.dtype)


def make_inputs():
    gate = torch.randn(TOKENS, INTERMEDIATE, dtype=torch.bfloat16)
    up = torch.randn(TOKENS, INTERMEDIATE, dtype=torch.bfloat16)
    return [gate, up]
