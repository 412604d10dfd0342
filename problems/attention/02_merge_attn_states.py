"""Merge two partial attention states by their log-sum-exp (split-KV / cascade / chunked-prefill context merge, vLLM merge_attn_states; Llama-3-8B heads)."""
import torch

NUM_TOKENS = 4096
NUM_HEADS = 32
HEAD_SIZE = 128


@torch.no_grad()
def reference(prefix_output: torch.Tensor, prefix_lse: torch.Tensor,
              suffix_output: torch.Tensor, suffix_lse: torch.Tensor):
    # *_output: (tokens, heads, head_size), each normalised over its own part of the keys;
    # *_lse: (heads, tokens) float32 log-sum-exp of the scaled scores over that part.
    # Returns the attention over the union of both parts and its log-sum-exp.
    acc = torch.float64 if prefix_output.dtype == torch.float64 else torch.float32
    p_lse = prefix_lse.to(acc)
    s_lse = suffix_lse.to(acc)
    max_lse = torch.maximum(p_lse, s_lse)
    p_se = torch.exp(p_lse - max_lse)
    s_se = torch.exp(s_lse - max_lse)
    out_se = p_se + s_se
    p_scale = (p_se / out_se).transpose(0, 1).unsqueeze(-1)  # (tokens, heads, 1)
    s_scale = (s_se / out_se).transpose(0, 1).unsqueeze(-1)
    out = prefix_output.to(acc) * p_scale + suffix_output.to(acc) * s_scale
    out_lse = torch.log(out_se) + max_lse
    return out.to(prefix_output.dtype), out_lse.to(prefix_lse.dtype)


def make_inputs():
    prefix_output = torch.randn(NUM_TOKENS, NUM_HEADS, HEAD_SIZE, dtype=torch.bfloat16)
    suffix_output = torch.randn(NUM_TOKENS, NUM_HEADS, HEAD_SIZE, dtype=torch.bfloat16)
    # log-sum-exp of a few hundred to a few thousand keys with O(1) scores
    prefix_lse = 6.0 + 2.0 * torch.randn(NUM_HEADS, NUM_TOKENS, dtype=torch.float32)
    suffix_lse = 6.0 + 2.0 * torch.randn(NUM_HEADS, NUM_TOKENS, dtype=torch.float32)
    return [prefix_output, prefix_lse, suffix_output, suffix_lse]
