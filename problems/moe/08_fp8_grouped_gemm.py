"""Grouped fp8 MoE expert GEMM (DeepSeek-V3 routed-expert gate projection: hidden 7168 -> moe_intermediate 2048, 16 of the 256 experts on one device) over tokens already permuted by expert: for each expert e and its contiguous row range [expert_offsets[e], expert_offsets[e+1]) of the e4m3fn activations a (ragged; empty ranges allowed), y = (a @ w[e]^T accumulated in fp32 over the raw fp8 codes) * a_scale[row] (per-token) * w_scale[e, col] (per-expert per-output-channel), rounded once to bf16; returns y (M_TOTAL, INTER)."""
import torch

M_TOTAL = 4096     # permuted rows routed to this device's experts (256 per expert on average)
EXPERTS = 16       # local experts (DeepSeek-V3's 256 routed experts over 16-way expert parallelism)
HIDDEN = 7168      # DeepSeek-V3 hidden_size (the GEMM's K)
INTER = 2048       # DeepSeek-V3 moe_intermediate_size (the GEMM's N)
FP8_MAX = 448.0


@torch.no_grad()
def reference(a, a_scale, w, w_scale, expert_offsets):
    # a: (M_TOTAL, HIDDEN) e4m3fn, rows grouped by expert; a_scale: (M_TOTAL,) fp32; w: (EXPERTS, INTER, HIDDEN)
    # e4m3fn; w_scale: (EXPERTS, INTER) fp32; expert_offsets: (EXPERTS + 1,) int32, non-decreasing from 0 to M_TOTAL.
    acc = torch.float64 if a_scale.dtype == torch.float64 else torch.float32
    out_dtype = torch.float64 if acc == torch.float64 else torch.bfloat16
    y = torch.zeros(a.shape[0], w.shape[1], dtype=acc, device=a.device)
    offsets = expert_offsets.tolist()
    for e in range(w.shape[0]):
        lo, hi = offsets[e], offsets[e + 1]
        if hi > lo:
            y[lo:hi] = (a[lo:hi].to(acc) @ w[e].to(acc).T) * a_scale[lo:hi, None].to(acc) * w_scale[e, None, :].to(acc)
    return y.to(out_dtype)


def make_inputs():
    # Skewed expert load (redrawn per seed): some experts get many rows, some none.
    popularity = torch.softmax(0.8 * torch.randn(EXPERTS), dim=0)
    counts = torch.bincount(torch.multinomial(popularity, M_TOTAL, replacement=True), minlength=EXPERTS)
    expert_offsets = torch.cat((torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0))).to(torch.int32)
    # Per-token dynamic fp8 activations, per-output-channel fp8 weights (scale = amax / 448).
    x = torch.randn(M_TOTAL, HIDDEN) * torch.exp(torch.randn(M_TOTAL, 1))
    a_scale = x.abs().amax(dim=1).clamp_min(1e-4) / FP8_MAX
    a = (x / a_scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    wf = 0.02 * torch.randn(EXPERTS, INTER, HIDDEN) * torch.exp(0.5 * torch.randn(EXPERTS, INTER, 1))
    w_scale = wf.abs().amax(dim=2).clamp_min(1e-8) / FP8_MAX
    w = (wf / w_scale[:, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return [a, a_scale.contiguous(), w, w_scale.contiguous(), expert_offsets]
