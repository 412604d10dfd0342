"""Token-embedding weight gradient, accumulated in place (Llama-3.1-8B: vocab 128256, hidden 4096; an 8192-token micro-batch whose ids follow a Zipf-like law, so frequent tokens repeat hundreds of times): dW[token_ids[i]] += d_out[i] for every token into the existing fp32 gradient dW (VOCAB, HIDDEN), bf16 d_out; returns None."""
import torch

TOKENS = 8192
VOCAB = 128256   # Llama-3.1-8B vocab_size
HIDDEN = 4096    # Llama-3.1-8B hidden_size
ZIPF_S = 1.1     # exponent of the rank-frequency law of the drawn token ids


@torch.no_grad()
def reference(token_ids: torch.Tensor, d_out: torch.Tensor, dw: torch.Tensor):
    # token_ids: (TOKENS,) int64; d_out: (TOKENS, HIDDEN) bf16, the gradient at the embedding output;
    # dw: (VOCAB, HIDDEN) fp32, the gradient accumulated over earlier micro-batches, updated in place.
    # The scatter-add accumulates in float32 (float64 for the judge's anchor). The order of the additions into a
    # row is not fixed, so any order is correct to float32 rounding.
    dw.index_add_(0, token_ids, d_out.to(dw.dtype))


def make_inputs():
    # Zipf-like ids: rank r has probability ~ r^-ZIPF_S, ranks are mapped to random vocabulary ids; the most
    # frequent id then takes ~13% of the batch and most of the vocabulary is never hit.
    ranks = torch.arange(1, VOCAB + 1, dtype=torch.float64)
    rank_of = torch.multinomial((ranks ** -ZIPF_S).to(torch.float32), TOKENS, replacement=True)
    token_ids = torch.randperm(VOCAB)[rank_of].to(torch.int64)
    d_out = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    dw = torch.randn(VOCAB, HIDDEN, dtype=torch.float32)
    return [token_ids, d_out, dw]
