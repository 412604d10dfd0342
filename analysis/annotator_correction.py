"""Claim prevalence corrected for the annotator's measured error, with intervals that carry the gold set's own
sampling uncertainty (issue 26, step 4: prevalence first; survival and reinforcement are not corrected yet).

An annotator that labels a claim of category c as c with probability `se` (its recall) and a claim of another
category as c with probability `fp` reports an expected share q = p·se + (1 − p)·fp of a true share p, so
p = (q − fp) / (se − fp) (Rogan and Gladen's estimator), clipped to [0, 1]. `se` and `fp` come from the hand-labelled
test split (`mkb_ray/claims/annotator_error.py`): se = true positives / gold claims of c, fp = (claims labelled c −
true positives) / gold claims of other categories. When se − fp is below `MIN_SEPARATION` the labels carry too
little about c to invert, and no corrected value is given.

Intervals: a percentile bootstrap that, in each replicate, resamples the chains (each chain's mean share over its
hops is one observation) and redraws the gold counts binomially (the test split is itself a sample: 19 gold closures
pin a recall down to about ±0.2). Assumption, stated wherever the value is shown: the run's claims are labelled as
well as the gold split's real-style text is. Claims the gold set leaves unlabelled (asides) are outside both rates.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np
import polars as pl

from ..claims.annotator_error import AnnotatorError
from .propagation import ClaimNode, category_of

MIN_SEPARATION = 0.05


@dataclass(frozen=True)
class GoldRates:
    """One category's counts on the gold split."""

    true_positives: int
    gold: int  # gold claims of the category
    false_positives: int
    others: int  # gold claims of other categories

    @property
    def sensitivity(self) -> float:
        return self.true_positives / self.gold if self.gold else 0.0

    @property
    def false_positive_rate(self) -> float:
        return self.false_positives / self.others if self.others else 0.0


def gold_rates(error: AnnotatorError, category: str) -> Optional[GoldRates]:
    score = error.per_category.get(category)
    if score is None or score.gold == 0:
        return None
    return GoldRates(score.true_positives, score.gold, max(score.predicted - score.true_positives, 0),
                     error.claims - score.gold)


def rogan_gladen(observed: float, sensitivity: float, false_positive_rate: float) -> Optional[float]:
    """The true share behind an observed share (see the module docstring); None when the labels cannot be inverted."""
    separation = sensitivity - false_positive_rate
    if separation < MIN_SEPARATION:
        return None
    return float(min(1.0, max(0.0, (observed - false_positive_rate) / separation)))


def _chain_means(nodes: Iterable[ClaimNode], categories: Sequence[str]) -> dict[str, np.ndarray]:
    """Per category, each chain's mean share of it over the chain's hops with claims (one pass over the nodes)."""
    per_hop: dict[tuple[str, int], Counter[str]] = defaultdict(Counter)
    for node in nodes:
        per_hop[node.chain_id, node.hop][category_of(node)] += 1
    shares: dict[str, dict[str, list[float]]] = {c: defaultdict(list) for c in categories}
    for (chain, _), counts in per_hop.items():
        total = sum(counts.values())
        for category in categories:
            shares[category][chain].append(counts[category] / total)
    return {c: np.array([np.mean(v) for v in by_chain.values()], dtype=float) for c, by_chain in shares.items()}


def corrected_prevalence(nodes: Sequence[ClaimNode], error: AnnotatorError, categories: Sequence[str],
                         n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Per category: n_chains, raw (mean over chains of each chain's mean share over its hops) with its bootstrap
    interval, the gold rates used (sensitivity, false_positive_rate, gold), and corrected with an interval that also
    redraws the gold counts; corrected is None where the category has no gold claims or cannot be inverted."""
    rng = np.random.default_rng(seed)
    tail = [50 * (1 - level), 50 * (1 + level)]
    rows = []
    chain_means = _chain_means(nodes, categories)
    for category in categories:
        means = chain_means[category]
        rates = gold_rates(error, category)
        row: dict = {"category": category, "n_chains": int(means.size),
                     "raw": float(means.mean()) if means.size else None, "raw_lo": None, "raw_hi": None,
                     "sensitivity": rates.sensitivity if rates else None,
                     "false_positive_rate": rates.false_positive_rate if rates else None,
                     "gold": rates.gold if rates else 0, "corrected": None, "corrected_lo": None, "corrected_hi": None}
        if means.size and rates is not None:
            row["corrected"] = rogan_gladen(row["raw"], rates.sensitivity, rates.false_positive_rate)
        if means.size and n_boot > 0:
            observed = means[rng.integers(0, means.size, size=(n_boot, means.size))].mean(axis=1)
            row["raw_lo"], row["raw_hi"] = (float(v) for v in np.percentile(observed, tail))
            if row["corrected"] is not None and rates is not None:
                se = rng.binomial(rates.gold, rates.sensitivity, n_boot) / rates.gold
                fp = rng.binomial(rates.others, rates.false_positive_rate, n_boot) / max(rates.others, 1)
                separation = se - fp
                with np.errstate(divide="ignore", invalid="ignore"):
                    corrected = np.clip((observed - fp) / separation, 0.0, 1.0)
                # A replicate whose redrawn labels cannot be inverted says the share could be anything: when more
                # than 1 - level of them cannot, so does the interval.
                corrected = np.where(separation < MIN_SEPARATION, np.nan, corrected)
                if np.isnan(corrected).mean() > 1 - level:
                    row["corrected_lo"], row["corrected_hi"] = 0.0, 1.0
                else:
                    row["corrected_lo"], row["corrected_hi"] = (float(v) for v in np.nanpercentile(corrected, tail))
        rows.append(row)
    schema = {"category": pl.Utf8, "n_chains": pl.Int64, "raw": pl.Float64, "raw_lo": pl.Float64,
              "raw_hi": pl.Float64, "sensitivity": pl.Float64, "false_positive_rate": pl.Float64, "gold": pl.Int64,
              "corrected": pl.Float64, "corrected_lo": pl.Float64, "corrected_hi": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


__all__ = ["GoldRates", "MIN_SEPARATION", "corrected_prevalence", "gold_rates", "rogan_gladen"]
