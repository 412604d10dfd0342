"""How far the LLM judge agrees with the rule pass on the causes of harmed cell-replicates: n, raw agreement,
Cohen's κ and the confusion table. Pure: pairs of causes in, numbers and polars frames out.

Definitions (docs/metrics.md, "Failure attribution"), over the harmed cell-replicates both passes answered (a
cell-replicate the judge left unjudged is counted in `n_unjudged`, not compared):
- **raw agreement** p_o = (pairs with the same cause) / n;
- **Cohen's κ** = (p_o − p_e) / (1 − p_e), with p_e = Σ_c p_rule(c) · p_judge(c), the agreement expected from the
  two passes' marginal shares alone (`mkb_ray.claims.scoring.cohens_kappa`; κ = 1 when p_e = 1);
- the **confusion table**: one row per rule cause, one column per judge cause, counts.

Worked example (tests/test_attribution_judge.py): ten compared pairs, rule → judge —
noise→noise, noise→execution_error, execution_error→execution_error ×2, execution_error→budget_exhaustion,
budget_exhaustion→budget_exhaustion ×2, search_truncation→search_truncation, unverified_adoption→unattributed,
unattributed→unattributed — and one unjudged. p_o = 7/10 = 0.7. Marginals, rule: noise 2, execution 3, budget 2,
search 1, unverified 1, unattributed 1; judge: noise 1, execution 3, budget 3, search 1, unattributed 2. p_e =
(2·1 + 3·3 + 2·3 + 1·1 + 1·0 + 1·2) / 10² = 0.2. κ = (0.7 − 0.2) / 0.8 = 0.625.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import polars as pl

from ..claims.scoring import cohens_kappa
from .attribution import CAUSES

SUMMARY_SCHEMA = {"n": pl.Int64, "n_agree": pl.Int64, "agreement": pl.Float64, "kappa": pl.Float64,
                  "n_unjudged": pl.Int64}
CONFUSION_SCHEMA = {"rule_cause": pl.Utf8, **{c: pl.Int64 for c in CAUSES}, "n": pl.Int64}


@dataclass(frozen=True)
class Agreement:
    """The rule pass against one judge. `agreement` and `kappa` are None when nothing could be compared.
    `summary`: one row (SUMMARY_SCHEMA); `confusion`: one row per rule cause seen (CONFUSION_SCHEMA: rule cause,
    a count per judge cause, the row's total), in CAUSES order."""

    n: int
    n_agree: int
    agreement: Optional[float]
    kappa: Optional[float]
    n_unjudged: int
    summary: pl.DataFrame
    confusion: pl.DataFrame


def agreement(pairs: Sequence[tuple[Optional[str], Optional[str]]]) -> Agreement:
    """Compare (rule cause, judge cause) pairs, one per harmed cell-replicate; a judge cause None is unjudged, a
    rule cause None (never computed) is left out."""
    unknown = sorted({c for pair in pairs for c in pair if c is not None and c not in CAUSES})
    if unknown:
        raise ValueError(f"not causes: {unknown} (causes: {', '.join(CAUSES)})")
    compared = [(r, j) for r, j in pairs if r is not None and j is not None]
    n_unjudged = sum(1 for r, j in pairs if r is not None and j is None)
    n = len(compared)
    n_agree = sum(r == j for r, j in compared)
    share = n_agree / n if n else None
    kappa = cohens_kappa([r for r, _ in compared], [j for _, j in compared]) if n else None
    summary = pl.DataFrame([{"n": n, "n_agree": n_agree, "agreement": share, "kappa": kappa,
                             "n_unjudged": n_unjudged}], schema=SUMMARY_SCHEMA)
    rows = []
    for rule in CAUSES:
        judged = [j for r, j in compared if r == rule]
        if judged:
            rows.append({"rule_cause": rule, **{c: judged.count(c) for c in CAUSES}, "n": len(judged)})
    return Agreement(n, n_agree, share, kappa, n_unjudged, summary, pl.DataFrame(rows, schema=CONFUSION_SCHEMA))
