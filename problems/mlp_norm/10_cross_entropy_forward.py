"""Per-token cross-entropy loss over the LM-head logits with an ignore index (Llama-3.1-8B training step: vocab 128256, 4096 tokens): loss[t] = logsumexp(logits[t]) - logits[t, label[t]], 0 where label[t] == -100; bf16 logits, fp32 loss."""
import torch

TOKENS = 4096
VOCAB = 128256
IGNORE_INDEX = -100
IGNORE_FRACTION = 0.1  # share of tokens whose label is IGNORE_INDEX (padding, prompt tokens)


@torch.no_grad()
def reference(logits: torch.Tensor, labels: torch.Tensor):
    # logits: (TOKENS, VOCAB) bf16; labels: (TOKENS,) int64 in [0, VOCAB) or IGNORE_INDEX. The log-sum-exp and the
    # loss are computed in float32 (float64 for the judge's anchor); ignored tokens get loss 0 (reduction "none").
    acc = torch.float64 if logits.dtype == torch.float64 else torch.float32
    x = logits.to(acc)
    lse = torch.logsumexp(x, dim=-1)
    ignored = labels == IGNORE_INDEX
    picked = x.gather(1, labels.clamp(min=0).unsqueeze(1)).squeeze(1)
    return torch.where(ignored, torch.zeros_like(lse), lse - picked)


def make_inputs():
    logits = (3.0 * torch.randn(TOKENS, VOCAB)).to(torch.bfloat16)
    labels = torch.randint(0, VOCAB, (TOKENS,), dtype=torch.int64)
    labels[torch.rand(TOKENS) < IGNORE_FRACTION] = IGNORE_INDEX
    return [logits, labels]
