"""Grouped MoE expert up-projection with fused SiLU-and-mul (Qwen3-30B-A3B: 128 experts, hidden 2048, moe_intermediate 768) over tokens already permuted by expert: for each expert e and its contiguous row range [expert_offsets[e], expert_offsets[e+1]) of x (ragged; empty ranges allowed), gate = x @ w13[e, :INTER]^T and up = x @ w13[e, INTER:]^T in fp32, y = silu(gate) * up rounded once to bf16; returns y (M_TOTAL, INTER)."""
import torch

M_TOTAL = 8192       # permuted rows: 1024 tokens x top-8 (Qwen3-30B-A3B num_experts_per_tok), 64 per expert on average
EXPERTS = 128        # Qwen3-30B-A3B num_experts
HIDDEN = 2048        # Qwen3-30B-A3B hidden_size
INTER = 768          # Qwen3-30B-A3B moe_intermediate_size


@torch.no_grad()
def reference(x, w13, expert_offsets):
    # x: (M_TOTAL, HIDDEN) bf16, rows grouped by expert; w13: (EXPERTS, 2 * INTER, HIDDEN) bf16 = [gate; up];
    # expert_offsets: (EXPERTS + 1,) int32, non-decreasing, expert_offsets[0] = 0, expert_offsets[-1] = M_TOTAL.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    inter = w13.shape[1] // 2
    y = torch.zeros(x.shape[0], inter, dtype=acc, device=x.device)
    offsets = expert_offsets.tolist()
    for e in range(w13.shape[0]):
        lo, hi = offsets[e], offsets[e + 1]
        if hi > lo:
            xe = x[lo:hi].to(acc)
            gate = xe @ w13[e, :inter].to(acc).T
            up = xe @ w13[e, inter:].to(acc).T
            y[lo:hi] = gate * torch.sigmoid(gate) * up
    return y.to(x.dtype)


def make_inputs():
    # Skewed expert load (redrawn per seed): some experts get many rows, some none.
    popularity = torch.softmax(0.7 * torch.randn(EXPERTS), dim=0)
    counts = torch.bincount(torch.multinomial(popularity, M_TOTAL, replacement=True), minlength=EXPERTS)
    expert_offsets = torch.cat((torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0))).to(torch.int32)
    x = torch.randn(M_TOTAL, HIDDEN, dtype=torch.bfloat16)
    w13 = (torch.randn(EXPERTS, 2 * INTER, HIDDEN) / HIDDEN ** 0.5).to(torch.bfloat16)
    return [x, w13, expert_offsets]
