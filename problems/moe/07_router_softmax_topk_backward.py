"""Backward of the MoE router's softmax -> top-k -> renormalise (Qwen3-30B-A3B training, norm_topk_prob: 128 experts, top-8, fp32 router): forward probs = softmax(router_logits) over EXPERTS, topk_weights = probs[topk_ids] / sum_k probs[topk_ids]; given grad_weights = dL/d(topk_weights), return grad_logits = dL/d(router_logits) (TOKENS, EXPERTS) float32, chained through the renormalisation and the softmax (zero for an expert only where the chain rule makes it so)."""
import torch

TOKENS = 16384   # tokens in one training micro-batch (4 x 4096-token sequences)
EXPERTS = 128    # Qwen3-30B-A3B num_experts
TOPK = 8         # Qwen3-30B-A3B num_experts_per_tok (norm_topk_prob = true)


@torch.no_grad()
def reference(router_logits, topk_ids, grad_weights):
    # router_logits: (TOKENS, EXPERTS) fp32; topk_ids: (TOKENS, TOPK) int32, distinct per token (the forward's
    # top-k); grad_weights: (TOKENS, TOPK) fp32. Autograd's dense chain: renormalisation, scatter, softmax backward.
    ids = topk_ids.long()
    probs = torch.softmax(router_logits, dim=-1)
    selected = probs.gather(1, ids)
    total = selected.sum(dim=-1, keepdim=True)
    weights = selected / total
    grad_selected = (grad_weights - (grad_weights * weights).sum(dim=-1, keepdim=True)) / total
    grad_probs = torch.zeros_like(probs).scatter_(1, ids, grad_selected)
    return probs * (grad_probs - (grad_probs * probs).sum(dim=-1, keepdim=True))


def make_inputs():
    # Distinct continuous logits (no ties in the top-k); topk_ids are the forward's top-k, largest first.
    router_logits = 1.5 * torch.randn(TOKENS, EXPERTS)
    topk_ids = router_logits.topk(TOPK, dim=-1).indices.to(torch.int32)
    grad_weights = torch.randn(TOKENS, TOPK)
    return [router_logits, topk_ids, grad_weights]
