"""Speculative-decoding tree verification attention (EAGLE-2 style draft tree of 64 tokens per sequence, Llama-3.1-8B: 32 query / 8 KV heads, head_dim 128, bf16): each draft token attends to its sequence's whole KV cache plus only its own ancestors in the tree (and itself), the mask derived from one parent index per token."""
import math

import torch

BATCH = 16
TREE_SIZE = 64  # draft tokens per sequence, in topological order: token 0 is the root, parent[i] < i
NUM_Q_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128
MAX_CONTEXT = 4096  # longest verified context; each sequence's length is drawn in [1, MAX_CONTEXT]


@torch.no_grad()
def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor,
              k_tree: torch.Tensor, v_tree: torch.Tensor, parents: torch.Tensor):
    # q: (batch, tree, q_heads, d) the draft tokens' queries; k_cache, v_cache: (batch, max_context, kv_heads, d),
    # the first context_lens[b] rows valid; k_tree, v_tree: (batch, tree, kv_heads, d) the draft tokens' own keys
    # and values; parents: (batch, tree) int32, parents[b, i] < i the parent of draft token i, -1 for the root.
    # Draft token i sees every valid cache row and the draft tokens on its path to the root (itself included).
    # Returns (batch, tree, q_heads, d) in q's dtype.
    batch, tree, q_heads, d = q.shape
    max_ctx, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(batch, tree, q_heads, d, dtype=acc, device=q.device)
    pos = torch.arange(max_ctx, device=q.device)
    for b in range(batch):
        # ancestor-or-self mask, built in topological order: row i = row parent(i) plus i itself
        anc = torch.zeros(tree, tree, dtype=torch.bool, device=q.device)
        for i, p in enumerate(parents[b].tolist()):
            if p >= 0:
                anc[i] = anc[p]
            anc[i, i] = True
        visible = torch.cat([(pos < int(context_lens[b]))[None, :].expand(tree, max_ctx), anc], dim=1)
        keys = torch.cat([k_cache[b], k_tree[b]], dim=0).to(acc)  # (max_ctx + tree, kv_heads, d)
        vals = torch.cat([v_cache[b], v_tree[b]], dim=0).to(acc)
        for h in range(kv_heads):
            qh = q[b, :, h * group:(h + 1) * group].to(acc)  # (tree, group, d)
            scores = torch.einsum("tgd,sd->gts", qh, keys[:, h]) * scale
            probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
            out[b, :, h * group:(h + 1) * group] = torch.einsum("gts,sd->tgd", probs, vals[:, h])
    return out.to(q.dtype)


def make_inputs():
    q = torch.randn(BATCH, TREE_SIZE, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k_cache = torch.randn(BATCH, MAX_CONTEXT, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v_cache = torch.randn(BATCH, MAX_CONTEXT, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    context_lens = torch.randint(1, MAX_CONTEXT + 1, (BATCH,), dtype=torch.int32)
    k_tree = torch.randn(BATCH, TREE_SIZE, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v_tree = torch.randn(BATCH, TREE_SIZE, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    # a random recursive tree per sequence: token i > 0 hangs under a uniformly drawn earlier token
    idx = torch.arange(TREE_SIZE, dtype=torch.float64)
    parents = (torch.rand(BATCH, TREE_SIZE, dtype=torch.float64) * idx).floor().to(torch.int32)
    parents[:, 0] = -1
    return [q, k_cache, v_cache, context_lens, k_tree, v_tree, parents]
