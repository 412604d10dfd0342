"""W4A16 decode GEMV with AWQ int4 weights, Llama-3.1-8B down_proj (K = intermediate 14336 -> N = hidden 4096, group 128) for a decode batch of TOKENS: y = bf16(x @ W) with W[k, n] = (q[k, n] - z[k // 128, n]) * scale[k // 128, n] dequantised on the fly; AWQ packing: int32 qweight (K, N // 8) and qzeros (K // 128, N // 8) hold 8 columns per word with column 8c + j in bits [s_j, s_j + 4), s = (0, 16, 4, 20, 8, 24, 12, 28) (AWQ's 0,2,4,6,1,3,5,7 order); bf16 scales (K // 128, N)."""
import torch

TOKENS = 8          # decode batch (the kernel must handle 1-8)
N = 4096            # Llama-3.1-8B hidden_size (down_proj out_features)
K = 14336           # Llama-3.1-8B intermediate_size (down_proj in_features)
GROUP = 128         # AWQ q_group_size
PACK = 8            # int4 values per int32 word
AWQ_SHIFTS = (0, 16, 4, 20, 8, 24, 12, 28)   # bit offset of column 8c + j inside word c


def _unpack(words: torch.Tensor) -> torch.Tensor:
    # (R, C) int32 -> (R, 8C) int32 in 0..15 (arithmetic shift, then the mask drops the sign extension)
    shifts = torch.tensor(AWQ_SHIFTS, dtype=torch.int32, device=words.device)
    return ((words.unsqueeze(-1) >> shifts) & 0xF).reshape(words.shape[0], -1)


@torch.no_grad()
def reference(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor):
    # x: (TOKENS, K) bf16; qweight: (K, N // 8) int32; scales: (K // GROUP, N) bf16; qzeros: (K // GROUP, N // 8)
    # int32. (q - z) * scale is exact in float32, so W is held unrounded; the product accumulates in float32
    # (float64 for the judge's anchor) and is rounded once to bf16.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    group = qweight.shape[0] // scales.shape[0]
    q = _unpack(qweight).to(acc)
    z = _unpack(qzeros).to(acc).repeat_interleave(group, dim=0)
    w = (q - z) * scales.to(acc).repeat_interleave(group, dim=0)
    return (x.to(acc) @ w).to(x.dtype)


def _pack(codes: torch.Tensor) -> torch.Tensor:
    # (R, 8C) codes in 0..15 -> (R, C) int32 in AWQ order (built in int64, wrapped to int32's two's complement)
    words = torch.zeros(codes.shape[0], codes.shape[1] // PACK, dtype=torch.int64)
    for j, shift in enumerate(AWQ_SHIFTS):
        words |= codes[:, j::PACK].to(torch.int64) << shift
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def make_inputs():
    groups = K // GROUP
    x = torch.randn(TOKENS, K, dtype=torch.bfloat16)
    qweight = _pack(torch.randint(0, 16, (K, N), dtype=torch.uint8))
    # zero points of real AWQ groups sit near the middle of the range; scales ~ group range / 15 of 0.02-std weights
    qzeros = _pack(torch.randint(5, 11, (groups, N), dtype=torch.uint8))
    scales = (0.006 * torch.exp(0.3 * torch.randn(groups, N))).to(torch.bfloat16)
    return [x, qweight, scales, qzeros]
