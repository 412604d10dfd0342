"""DeepSeek-V3 block-scaled fp8 GEMM (routed-expert down_proj: K = moe_intermediate_size 2048, N = hidden 7168): y = (A * a_scale) @ (B * b_scale)^T with e4m3fn A (M, K) scaled per token and 1x128 group of K, e4m3fn B (N, K) scaled per 128x128 block, fp32 accumulation, bf16 output (M, N)."""
import torch

M = 4096      # tokens routed to the expert group (one prefill batch)
N = 7168      # DeepSeek-V3 hidden_size
K = 2048      # DeepSeek-V3 moe_intermediate_size
BLOCK = 128   # quantization block: activations 1 x 128, weights 128 x 128
FP8_MAX = 448.0


@torch.no_grad()
def reference(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor):
    # a: (M, K) e4m3fn, a_scale: (M, K // 128) fp32; b: (N, K) e4m3fn, b_scale: (N // 128, K // 128) fp32.
    # Dequantize in float32 (float64 when the judge computes its anchor), one matmul, round to bf16 last.
    acc = torch.float64 if a_scale.dtype == torch.float64 else torch.float32
    out_dtype = torch.float64 if acc == torch.float64 else torch.bfloat16
    blk = a.shape[1] // a_scale.shape[1]
    a_deq = a.to(acc) * a_scale.to(acc).repeat_interleave(blk, dim=1)
    b_deq = b.to(acc) * b_scale.to(acc).repeat_interleave(blk, dim=0).repeat_interleave(blk, dim=1)
    return (a_deq @ b_deq.T).to(out_dtype)


def make_inputs():
    # Quantize random activations / weights the way DeepSeek-V3 does: scale = amax / 448 per group / block.
    x = torch.randn(M, K) * torch.exp(torch.randn(M, 1))                      # per-token dynamic range
    x = x * torch.exp(0.5 * torch.randn(1, K // BLOCK)).repeat_interleave(BLOCK, dim=1)
    xg = x.reshape(M, K // BLOCK, BLOCK)
    a_scale = xg.abs().amax(dim=-1).clamp_min(1e-4) / FP8_MAX                  # (M, K // 128)
    a = (xg / a_scale[:, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(M, K)
    wb = 0.02 * torch.randn(N // BLOCK, BLOCK, K // BLOCK, BLOCK)
    wb = wb * torch.exp(0.5 * torch.randn(N // BLOCK, 1, K // BLOCK, 1))          # per-block dynamic range
    b_scale = wb.abs().amax(dim=(1, 3)).clamp_min(1e-8) / FP8_MAX               # (N // 128, K // 128)
    b = (wb / b_scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(N, K)
    return [a, a_scale.contiguous(), b, b_scale.contiguous()]
