"""Cross-entropy backward over the Llama-3.1-8B vocabulary (vocab 128256, a 4096-token training micro-batch, mean reduction, ignore_index -100): d_logits = (softmax(logits) - onehot(target)) * grad / n_valid for every token whose target is not ignored, 0 for ignored tokens; bf16 logits in and out, fp32 softmax."""
import torch

TOKENS = 4096
VOCAB = 128256      # Llama-3.1-8B vocab_size
IGNORE_INDEX = -100  # PyTorch's cross_entropy default (padding / prompt tokens)


@torch.no_grad()
def reference(logits: torch.Tensor, target: torch.Tensor, grad_loss: torch.Tensor):
    # logits: (TOKENS, VOCAB) bf16; target: (TOKENS,) int64 class ids or IGNORE_INDEX; grad_loss: (1,) fp32, the
    # upstream gradient of the mean loss. The softmax is recomputed in float32 (float64 for the judge's anchor).
    acc = torch.float64 if logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(logits.to(acc), dim=-1)
    valid = target != IGNORE_INDEX
    n_valid = valid.sum().clamp_min(1).to(acc)
    rows = torch.arange(logits.shape[0], device=logits.device)
    probs[rows, torch.where(valid, target, 0)] -= valid.to(acc)
    d_logits = probs * (grad_loss.to(acc) / n_valid) * valid.to(acc)[:, None]
    return d_logits.to(logits.dtype)


def make_inputs():
    # Logits with a per-token temperature (some peaked rows, some flat ones); about 1 token in 8 is ignored.
    logits = torch.randn(TOKENS, VOCAB) * (1.0 + 3.0 * torch.rand(TOKENS, 1))
    target = torch.randint(0, VOCAB, (TOKENS,), dtype=torch.int64)
    target[torch.rand(TOKENS) < 0.125] = IGNORE_INDEX
    grad_loss = 0.5 + torch.rand(1)
    return [logits.to(torch.bfloat16), target, grad_loss]
