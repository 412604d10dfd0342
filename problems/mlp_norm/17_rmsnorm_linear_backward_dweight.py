"""Weight gradient of a linear layer fed by an RMSNorm, with the norm recomputed instead of stored (Llama-3.1-8B attention q_proj: hidden 4096 -> 32 heads x 128 = 4096, rms_norm_eps 1e-5, a 4096-token training micro-batch): y = bf16(x * rsqrt(mean(x^2) + eps) * gamma); dW = dy^T @ y with fp32 accumulation, returned as the fp32 gradient (Q_DIM, HIDDEN)."""
import torch

TOKENS = 4096
HIDDEN = 4096   # Llama-3.1-8B hidden_size
Q_DIM = 4096    # q_proj out_features: num_attention_heads 32 * head_dim 128
EPS = 1e-5      # Llama-3.1-8B rms_norm_eps


@torch.no_grad()
def reference(x: torch.Tensor, gamma: torch.Tensor, dy: torch.Tensor):
    # x: (TOKENS, HIDDEN) bf16, the norm's input; gamma: (HIDDEN,) bf16, the norm's weight; dy: (TOKENS, Q_DIM)
    # bf16, the gradient at q_proj's output. The norm is recomputed in float32 (float64 for the judge's anchor) and
    # rounded to the activation dtype, as the forward's GEMM consumed it; the GEMM accumulates in float32.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(acc)
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    y = (xf * rstd * gamma.to(acc)).to(x.dtype)
    return dy.to(acc).t() @ y.to(acc)


def make_inputs():
    # Residual-stream inputs with a per-token magnitude and a few outlier channels; an upstream gradient whose
    # scale varies per token (as it does across a packed batch).
    x = torch.randn(TOKENS, HIDDEN) * torch.exp(torch.randn(TOKENS, 1))
    x[:, torch.randperm(HIDDEN)[:8]] *= 16.0
    gamma = 1.0 + 0.1 * torch.randn(HIDDEN)
    dy = 0.01 * torch.randn(TOKENS, Q_DIM) * torch.exp(0.5 * torch.randn(TOKENS, 1))
    return [x.to(torch.bfloat16), gamma.to(torch.bfloat16), dy.to(torch.bfloat16)]
