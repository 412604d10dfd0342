"""SwiGLU activation of a gate_up projection (Llama-3-8B MLP, prefill; vLLM silu_and_mul): out = silu(x[:, :I]) * x[:, I:]."""
import torch
import torch.nn.functional as F

TOKENS = 4096
INTERMEDIATE = 14336


@torch.no_grad()
def reference(x: torch.Tensor):
    # x holds [gate | up] along the last dimension, as the fused gate_up_proj writes it.
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def make_inputs():
    x = torch.randn(TOKENS, 2 * INTERMEDIATE, dtype=torch.bfloat16)
    return [x]
