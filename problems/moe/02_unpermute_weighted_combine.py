"""MoE finalize / unpermute-and-reduce (vLLM moe_unpermute, TensorRT-LLM finalizeMoeRouting; Qwen3-30B-A3B): out[t] = sum_k topk_weights[t, k] * expert_out[src_row[t, k]] over the TOPK expert-sorted rows of token t, accumulated in fp32; returns out (TOKENS, HIDDEN) bf16."""
import torch

TOKENS = 4096    # tokens in one step (a 4096-token prefill batch)
TOPK = 8         # Qwen3-30B-A3B num_experts_per_tok
HIDDEN = 2048    # Qwen3-30B-A3B hidden_size
EXPERTS = 128    # Qwen3-30B-A3B num_experts (only used to build the expert-sorted row order)


@torch.no_grad()
def reference(expert_out, topk_weights, src_row):
    # expert_out: (TOKENS * TOPK, HIDDEN) bf16, the down-projection outputs in expert-sorted order;
    # topk_weights: (TOKENS, TOPK) float32; src_row: (TOKENS, TOPK) int32, the row of expert_out for (t, k).
    acc = torch.float64 if expert_out.dtype == torch.float64 else torch.float32
    rows = expert_out.to(acc)[src_row.long()]                       # (TOKENS, TOPK, HIDDEN)
    out = (rows * topk_weights.to(acc).unsqueeze(-1)).sum(dim=1)
    return out.to(expert_out.dtype)


def make_inputs():
    # Routing: TOPK distinct experts per token; rows are grouped by expert (stable in token order), as the
    # grouped GEMM produced them; src_row is the inverse of that permutation.
    topk_ids = torch.rand(TOKENS, EXPERTS).topk(TOPK, dim=-1).indices
    order = torch.sort(topk_ids.flatten(), stable=True).indices       # permuted row i holds flat pair order[i]
    src_row = torch.empty(TOKENS * TOPK, dtype=torch.int64)
    src_row[order] = torch.arange(TOKENS * TOPK)
    src_row = src_row.view(TOKENS, TOPK).to(torch.int32)
    expert_out = torch.randn(TOKENS * TOPK, HIDDEN, dtype=torch.bfloat16)
    topk_weights = 0.1 + torch.rand(TOKENS, TOPK)
    topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return [expert_out, topk_weights, src_row]
