"""DeepSeek-V3 grouped top-k MoE routing (noaux_tc): scores = sigmoid(router_logits) in fp32, choice = scores + e_score_correction_bias; each of N_GROUP = 8 groups of 32 experts is scored by the sum of its top-2 choice values, the TOPK_GROUP = 4 best groups are kept, the TOPK = 8 experts of largest choice value among them are selected (sorted by choice value, descending), and their sigmoid scores (without bias) are renormalised to sum 1 and scaled by 2.5; returns (topk_weights float32 (TOKENS, TOPK), topk_ids int32 (TOKENS, TOPK))."""
import torch

TOKENS = 4096          # tokens routed in one step (a 4096-token prefill batch)
EXPERTS = 256          # DeepSeek-V3 n_routed_experts
N_GROUP = 8            # DeepSeek-V3 n_group
TOPK_GROUP = 4         # DeepSeek-V3 topk_group; solve uses 4 (not inferable from the inputs)
TOPK = 8               # DeepSeek-V3 num_experts_per_tok; solve uses 8
SCALE = 2.5            # DeepSeek-V3 routed_scaling_factor (norm_topk_prob = true)
GROUP_GAP = 1e-4       # make_inputs: least gap between the 4th and 5th best group scores


@torch.no_grad()
def reference(router_logits, correction_bias):
    # router_logits: (TOKENS, EXPERTS) float32; correction_bias: (EXPERTS,) float32.
    acc = torch.float64 if router_logits.dtype == torch.float64 else torch.float32
    tokens, experts = router_logits.shape
    scores = torch.sigmoid(router_logits.to(acc))
    choice = scores + correction_bias.to(acc)
    group_scores = choice.view(tokens, N_GROUP, -1).topk(2, dim=-1).values.sum(dim=-1)
    group_idx = group_scores.topk(TOPK_GROUP, dim=-1).indices
    group_mask = torch.zeros(tokens, N_GROUP, dtype=torch.bool, device=choice.device).scatter_(1, group_idx, True)
    expert_mask = group_mask.repeat_interleave(experts // N_GROUP, dim=1)
    ids = choice.masked_fill(~expert_mask, float("-inf")).topk(TOPK, dim=-1, sorted=True).indices
    weights = scores.gather(1, ids)
    weights = weights / weights.sum(dim=-1, keepdim=True) * SCALE
    return weights.to(router_logits.dtype), ids.to(torch.int32)


def _choice_values(tokens):
    # Per token: EXPERTS distinct choice values in [0.1, 0.9], consecutive values >= 0.4 / EXPERTS apart (so the
    # expert ranking has no near-ties), randomly permuted over the experts.
    base = torch.rand(tokens, EXPERTS).sort(dim=-1).values
    values = 0.1 + 0.4 * base + 0.4 * torch.arange(EXPERTS, dtype=torch.float32) / EXPERTS
    return torch.gather(values, -1, torch.rand(tokens, EXPERTS).argsort(dim=-1))


def _group_gap(choice):
    group_scores = choice.view(choice.shape[0], N_GROUP, -1).topk(2, dim=-1).values.sum(dim=-1)
    ranked = group_scores.sort(dim=-1, descending=True).values
    return ranked[:, TOPK_GROUP - 1] - ranked[:, TOPK_GROUP]


def make_inputs():
    correction_bias = 0.1 * (torch.rand(EXPERTS) - 0.5)
    choice = _choice_values(TOKENS)
    # Redraw tokens whose kept-group set would hinge on a near-tie of group scores.
    bad = _group_gap(choice) < GROUP_GAP
    while bool(bad.any()):
        choice[bad] = _choice_values(int(bad.sum()))
        bad = _group_gap(choice) < GROUP_GAP
    probs = (choice - correction_bias).double()                  # in [0.05, 0.95]: sigmoid(logit) = probs
    router_logits = torch.log(probs / (1.0 - probs)).to(torch.float32)
    return [router_logits, correction_bias]
