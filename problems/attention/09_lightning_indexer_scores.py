"""DeepSeek-V3.2 lightning indexer scores for a prefill chunk (64 indexer heads, index_head_dim 128, one shared key per token): score[i, j] = sum_h w[i, h] * relu(q[i, h] . k[j]), fp32, causal (keys past the query's position score 0)."""
import torch

Q_TOKENS = 2048  # the chunk of queries being prefilled: the last Q_TOKENS positions of the context
K_TOKENS = 8192  # keys in the indexer's key cache (context so far, the chunk included)
INDEX_HEADS = 64
HEAD_DIM = 128


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, weights: torch.Tensor):
    # q: (q_tokens, heads, d) bf16 indexer queries; k: (k_tokens, d) bf16 indexer keys, shared by all heads;
    # weights: (q_tokens, heads) float32 per-token head weights (softmax scale and heads^-0.5 folded in).
    # Query i sits at position k_tokens - q_tokens + i and scores the keys j <= that position; later keys get 0.
    q_tokens, heads, d = q.shape
    k_tokens = k.shape[0]
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    qa = q.to(acc)
    ka = k.to(acc)
    wa = weights.to(acc)
    scores = torch.zeros(q_tokens, k_tokens, dtype=acc, device=q.device)
    for h in range(heads):  # one head at a time: (q_tokens, k_tokens) per step, not (q_tokens, heads, k_tokens)
        scores += wa[:, h, None] * torch.relu(qa[:, h, :] @ ka.T)
    pos = torch.arange(k_tokens, device=q.device)
    last = k_tokens - q_tokens + torch.arange(q_tokens, device=q.device)
    scores = scores.masked_fill(pos[None, :] > last[:, None], 0.0)  # future keys score 0 (no -inf: finite output)
    return scores.to(torch.float32)


def make_inputs():
    q = torch.randn(Q_TOKENS, INDEX_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(K_TOKENS, HEAD_DIM, dtype=torch.bfloat16)
    # weights_proj output times heads^-0.5 and the softmax scale d^-0.5, as the indexer folds them; either sign
    weights = torch.randn(Q_TOKENS, INDEX_HEADS, dtype=torch.float32) * (INDEX_HEADS ** -0.5 * HEAD_DIM ** -0.5)
    return [q, k, weights]
