"""Sampling logits processor (vLLM apply_top_k_top_p over the Llama-3.1-8B vocab 128256, a decode batch of 64): per row, scaled = logits / temperature; keep the TOP_K = 50 largest, then of those keep the smallest prefix (by descending value) whose softmax mass before each kept token is below TOP_P = 0.9; every other entry becomes -inf; fp32 in and out."""
import torch

BATCH = 64
VOCAB = 128256   # Llama-3.1-8B vocab_size
TOP_K = 50       # solve uses 50 (not inferable from the inputs)
TOP_P = 0.9      # solve uses 0.9 (not inferable from the inputs)
_TOP = 64        # make_inputs: the leading values drawn with guaranteed gaps
_MARGIN = 1e-3   # make_inputs: no row's top-p decision lies within this of TOP_P


@torch.no_grad()
def reference(logits: torch.Tensor, temperature: torch.Tensor):
    # logits: (BATCH, VOCAB) fp32; temperature: (BATCH,) fp32 > 0. A token of rank r (0 = largest) inside the top
    # k survives when the softmax mass (over the top-k set) of ranks 0 .. r-1 is below TOP_P, so the largest always
    # does; this is vLLM's ascending-cumsum rule "mask where cumsum <= 1 - p" written from the top.
    scaled = logits / temperature[:, None]
    vals, idx = torch.topk(scaled, TOP_K, dim=-1, largest=True, sorted=True)
    probs = torch.softmax(vals, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs
    kept = torch.where(mass_before < TOP_P, vals, torch.full_like(vals, float("-inf")))
    out = torch.full_like(scaled, float("-inf"))
    return out.scatter(1, idx, kept)


def _rows(n: int):
    # Per row: the _TOP leading logits fall by gaps of 0.02..0.2 times a row scale (peaked or flat rows), the rest
    # of the vocabulary sits at least 0.05 below them; all shuffled over the vocabulary.
    spread = torch.exp(1.2 * torch.randn(n, 1))
    gaps = (0.02 + 0.18 * torch.rand(n, _TOP)) * spread
    top = 10.0 + 3.0 * torch.randn(n, 1) - torch.cumsum(gaps, dim=-1)
    bulk = torch.randn(n, VOCAB - _TOP)
    bulk = bulk - bulk.amax(dim=-1, keepdim=True) + top[:, -1:] - 0.05 - torch.rand(n, 1)
    values = torch.cat([top, bulk], dim=-1)
    perm = torch.rand(n, VOCAB).argsort(dim=-1)
    temperature = 0.5 + torch.rand(n)
    # the top-p decisions, in float64: reject rows whose mass before some rank is within _MARGIN of TOP_P
    probs = torch.softmax(top[:, :TOP_K].double() / temperature.double()[:, None], dim=-1)
    before = torch.cumsum(probs, dim=-1) - probs
    ok = ((before - TOP_P).abs() > _MARGIN).all(dim=-1)
    return torch.gather(values, -1, perm), temperature, ok


def make_inputs():
    logits, temperature, ok = _rows(BATCH)
    while not bool(ok.all()):
        bad = (~ok).nonzero().flatten()
        fresh, fresh_t, fresh_ok = _rows(bad.numel())
        logits[bad], temperature[bad], ok[bad] = fresh, fresh_t, fresh_ok
    return [logits, temperature]
