"""Capacity-limited MoE token dispatch (GShard / Switch style, Mixtral-8x7B: 8 experts, top-2, hidden 4096, capacity factor 1.25): with C = ceil(CAPACITY_FACTOR * TOKENS * TOPK / EXPERTS), rank the assignments (t, k) of topk_ids k-major (all first choices in token order, then all second choices), give each its position = the number of earlier-ranked assignments to the same expert, drop those with position >= C, and copy hidden_states[t] into dispatched[expert, position] (unfilled slots zero); returns (dispatched (EXPERTS, C, HIDDEN) in hidden's dtype, kept bool (TOKENS, TOPK), positions int32 (TOKENS, TOPK) = position or -1 when dropped)."""
import math

import torch

TOKENS = 8192           # tokens in one training micro-batch (2 x 4096-token sequences)
HIDDEN = 4096           # Mixtral-8x7B hidden_size
EXPERTS = 8             # Mixtral-8x7B num_local_experts (sets the output shape; not inferable from the inputs)
TOPK = 2                # Mixtral-8x7B num_experts_per_tok
CAPACITY_FACTOR = 1.25  # GShard / Switch training capacity factor


@torch.no_grad()
def reference(hidden_states, topk_ids):
    # hidden_states: (TOKENS, HIDDEN); topk_ids: (TOKENS, TOPK) int32 in [0, EXPERTS), distinct within a token.
    tokens, topk = topk_ids.shape
    capacity = math.ceil(CAPACITY_FACTOR * tokens * topk / EXPERTS)
    ranked = topk_ids.t().reshape(-1).long()                              # priority order: k-major, then token
    onehot = torch.nn.functional.one_hot(ranked, EXPERTS)
    rank = (onehot.cumsum(0) - 1).gather(1, ranked.unsqueeze(1)).squeeze(1)
    position = rank.view(topk, tokens).t()                                # (TOKENS, TOPK)
    kept = position < capacity
    dispatched = torch.zeros(EXPERTS, capacity, hidden_states.shape[1], dtype=hidden_states.dtype,
                             device=hidden_states.device)
    token_of = torch.arange(tokens, device=topk_ids.device).unsqueeze(1).expand(tokens, topk)
    dispatched[topk_ids.long()[kept], position[kept]] = hidden_states[token_of[kept]]
    positions = torch.where(kept, position, torch.full_like(position, -1)).to(torch.int32)
    return dispatched, kept, positions


def make_inputs():
    hidden_states = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    # Skewed routing (redrawn per seed) with one hot expert, so its queue overflows the capacity and drops occur.
    popularity = torch.softmax(0.5 * torch.randn(EXPERTS), dim=0)
    popularity[torch.randint(0, EXPERTS, (1,))] += 0.35
    topk_ids = torch.multinomial(popularity.expand(TOKENS, EXPERTS), TOPK, replacement=False)
    return [hidden_states, topk_ids.to(torch.int32)]
