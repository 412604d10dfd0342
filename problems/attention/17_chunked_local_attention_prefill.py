"""Llama-4 chunked local attention in prefill (Llama-4-Scout: 40 query / 8 KV heads, head_dim 128, attention_chunk_size 8192, bf16): a packed ragged batch of new tokens whose sequences start at absolute positions not aligned to chunks; each query attends causally only to keys of its own 8192-position chunk (the packed keys also hold the earlier tokens of each sequence's first chunk), so attention resets at every chunk start."""
import math

import torch

BATCH = 4
Q_TOKENS = 16384  # new tokens of the packed batch; their per-sequence lengths are ragged
PREFIX_TOKENS = 16384  # keys before each sequence's first new token inside its first chunk, all sequences together
NUM_Q_HEADS = 40
NUM_KV_HEADS = 8
HEAD_DIM = 128
CHUNK_SIZE = 8192  # Llama-4 attention_chunk_size (a model constant, passed to the op as a scalar)
MAX_START_CHUNK = 4  # the first new token of a sequence lies in chunk 0 .. MAX_START_CHUNK - 1


@torch.no_grad()
def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
              cu_seqlens_k: torch.Tensor, start_pos: torch.Tensor, chunk_size: int):
    # q: (q_tokens, q_heads, d), the new tokens of the sequences packed one after another (cu_seqlens_q, int32);
    # k, v: (k_tokens, kv_heads, d), per sequence its keys packed likewise (cu_seqlens_k, int32): the new tokens'
    # keys are the last q_len_i of them and the ones before are the sequence's earlier tokens; start_pos: (batch,)
    # int32 absolute position of sequence i's first new token, so its key j sits at absolute position
    # start_pos_i + q_len_i - k_len_i + j. Query at position p attends to key position s iff s <= p and
    # s // chunk_size == p // chunk_size. Scores scaled by 1/sqrt(d); returns (q_tokens, q_heads, d).
    q_heads, d = q.shape[1], q.shape[2]
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(d)
    out = torch.zeros(q.shape[0], q_heads, d, dtype=acc, device=q.device)
    cq, ck, starts = cu_seqlens_q.tolist(), cu_seqlens_k.tolist(), start_pos.tolist()
    for i in range(len(starts)):
        q_len, k_len = cq[i + 1] - cq[i], ck[i + 1] - ck[i]
        if q_len <= 0:
            continue
        q_pos = starts[i] + torch.arange(q_len, device=q.device)
        k_pos = starts[i] + q_len - k_len + torch.arange(k_len, device=q.device)
        # queries of one chunk see keys of that chunk only: one block of the block-diagonal mask at a time
        for c in range(starts[i] // chunk_size, (starts[i] + q_len - 1) // chunk_size + 1):
            qsel = (q_pos // chunk_size == c).nonzero().flatten()
            ksel = (k_pos // chunk_size == c).nonzero().flatten()
            qa, qb = cq[i] + int(qsel[0]), cq[i] + int(qsel[-1]) + 1
            ka, kb = ck[i] + int(ksel[0]), ck[i] + int(ksel[-1]) + 1
            causal = k_pos[ksel][None, :] <= q_pos[qsel][:, None]  # (queries, keys) of this chunk
            for h in range(kv_heads):
                qh = q[qa:qb, h * group:(h + 1) * group].to(acc)  # (n_q, group, d)
                kh = k[ka:kb, h].to(acc)
                vh = v[ka:kb, h].to(acc)
                scores = torch.einsum("tgd,sd->gts", qh, kh) * scale
                scores = scores.masked_fill(~causal, float("-inf"))
                probs = torch.softmax(scores, dim=-1)
                out[qa:qb, h * group:(h + 1) * group] = torch.einsum("gts,sd->tgd", probs, vh)
    return out.to(q.dtype)


def make_inputs():
    # ragged new-token counts: BATCH - 1 distinct cuts of Q_TOKENS, every sequence at least one token
    cuts = torch.randperm(Q_TOKENS - 1)[:BATCH - 1].sort().values + 1
    bounds = torch.cat([torch.zeros(1, dtype=torch.long), cuts, torch.full((1,), Q_TOKENS, dtype=torch.long)])
    q_lens = bounds[1:] - bounds[:-1]
    # prefix_i = m + r_i - r_{i+1} (cyclic) sums to PREFIX_TOKENS and lies in [1, 2m - 1] < CHUNK_SIZE, so no
    # sequence starts on a chunk boundary; the longest prefix goes with the longest sequence, so the new tokens of
    # (nearly) every draw cross a chunk boundary
    m = PREFIX_TOKENS // BATCH
    r = torch.randint(0, m, (BATCH,))
    prefix = (m + r - r.roll(-1)).sort().values
    prefix = prefix[q_lens.argsort().argsort()]
    start_pos = torch.randint(0, MAX_START_CHUNK, (BATCH,)) * CHUNK_SIZE + prefix
    k_lens = prefix + q_lens
    cu_seqlens_q = bounds.to(torch.int32)
    cu_seqlens_k = torch.cat([torch.zeros(1, dtype=torch.long), k_lens.cumsum(0)]).to(torch.int32)
    q = torch.randn(Q_TOKENS, NUM_Q_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(Q_TOKENS + PREFIX_TOKENS, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(Q_TOKENS + PREFIX_TOKENS, NUM_KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    return [q, k, v, cu_seqlens_q, cu_seqlens_k, start_pos.to(torch.int32), CHUNK_SIZE]
