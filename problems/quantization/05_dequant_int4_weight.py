"""Dequantize group-quantized int4 weights (AWQ/GPTQ-style asymmetric 4-bit, group 128 along K) of Llama-3.1-8B's down_proj (N = hidden 4096, K = intermediate 14336) into bf16: codes are packed two per uint8 along K (low nibble = even k), 4-bit zero points two per uint8 along the group axis (low nibble = even group); w[n, k] = (q[n, k] - z[n, k // 128]) * scale[n, k // 128]."""
import torch

N = 4096      # Llama-3.1-8B hidden_size (down_proj out_features)
K = 14336     # Llama-3.1-8B intermediate_size (down_proj in_features)
GROUP = 128   # quantization group along K


@torch.no_grad()
def reference(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor):
    # qweight: (N, K // 2) uint8; scales: (N, K // GROUP) bf16; qzeros: (N, K // GROUP // 2) uint8.
    # (q - z) is a small integer, so (q - z) * scale is exact in float32 (float64 for the judge's anchor); the only
    # rounding is the final cast to the scales' dtype.
    acc = torch.float64 if scales.dtype == torch.float64 else torch.float32
    n, k_half = qweight.shape
    groups = scales.shape[1]
    q = torch.stack((qweight & 0xF, qweight >> 4), dim=-1).reshape(n, 2 * k_half)
    z = torch.stack((qzeros & 0xF, qzeros >> 4), dim=-1).reshape(n, groups)
    group = 2 * k_half // groups
    w = (q.to(acc) - z.to(acc).repeat_interleave(group, dim=1)) * scales.to(acc).repeat_interleave(group, dim=1)
    return w.to(scales.dtype)


def make_inputs():
    groups = K // GROUP
    q = torch.randint(0, 16, (N, K), dtype=torch.uint8)
    qweight = (q[:, 0::2] | (q[:, 1::2] << 4)).contiguous()
    z = torch.randint(0, 16, (N, groups), dtype=torch.uint8)
    qzeros = (z[:, 0::2] | (z[:, 1::2] << 4)).contiguous()
    # per-group scales of a real checkpoint: ~amax / 15 of 0.02-std weights, varying per channel and group
    scales = (0.006 * torch.exp(0.3 * torch.randn(N, groups))).to(torch.bfloat16)
    return [qweight, scales, qzeros]
