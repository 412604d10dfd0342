"""Decode-batch MLP down projection fused with the residual add (Llama-3.1-8B: intermediate 14336 -> hidden 4096, a batch of 64 decode tokens): out = residual + h @ W_down^T, bf16 operands, fp32 accumulation, one rounding to bf16 at the end."""
import torch

TOKENS = 64
INTERMEDIATE = 14336  # Llama-3.1-8B intermediate_size
HIDDEN = 4096         # Llama-3.1-8B hidden_size


@torch.no_grad()
def reference(h: torch.Tensor, w_down: torch.Tensor, residual: torch.Tensor):
    # h: (TOKENS, INTERMEDIATE) bf16 (the SwiGLU output), w_down: (HIDDEN, INTERMEDIATE) bf16 (nn.Linear layout),
    # residual: (TOKENS, HIDDEN) bf16. Product and add in float32 (float64 for the judge's anchor), rounded once.
    acc = torch.float64 if h.dtype == torch.float64 else torch.float32
    out = residual.to(acc) + h.to(acc) @ w_down.to(acc).t()
    return out.to(h.dtype)


def make_inputs():
    h = torch.randn(TOKENS, INTERMEDIATE) * torch.exp(0.5 * torch.randn(TOKENS, 1))
    w_down = torch.randn(HIDDEN, INTERMEDIATE) / INTERMEDIATE ** 0.5
    residual = 2.0 * torch.randn(TOKENS, HIDDEN)
    return [h.to(torch.bfloat16), w_down.to(torch.bfloat16), residual.to(torch.bfloat16)]
