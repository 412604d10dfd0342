"""Survival and reinforcement of a category's lineages corrected for the annotator's measured error (issue 26,
step 4; prevalence is corrected in annotator_correction.py).

The lineages `mkb lineage` follows for category c are the ones whose first claim the annotator *labelled* c. That
sample mixes true c claims (a share w) with claims of other categories it called c (1 − w), and the two may fare
differently: an unsupported closure may outlive a hardware fact. So a raw curve is
S_obs(t) = w·S_c(t) + (1 − w)·S_other(t), and likewise the reinforced share of labelled-c parents,
R_obs = w·R_c + (1 − w)·R_other. The run itself shows how lineages labelled other than c fare (S_other, R_other:
every lineage and parent the annotator did not label c), and the gold test split gives the annotator's recall `se`
and false-positive rate `fp` for c, so with q the labelled share of c and p = (q − fp)/(se − fp) its corrected
share (Rogan–Gladen), the purity is w = se·p / q, and S_c(t) = (S_obs(t) − (1 − w)·S_other(t)) / w, clipped to
[0, 1]. q is taken over the sample the metric weighs: lineage births for survival (a category that outlives the
rest is commoner among a hop's claims than among births), parents with a next hop for the reinforced share.

Intervals: a percentile bootstrap that, in each replicate, resamples the chains (all three quantities from the same
resample) and redraws the gold counts binomially. No corrected value when w is below MIN_PURITY (the labelled
sample is mostly other categories; dividing by w would amplify noise) or the labels cannot be inverted.

Assumptions, stated wherever the values are shown: the run's claims are labelled as well as the gold split's text
is; the lineages labelled other than c fare like the other-category claims mislabelled c (the mislabelled ones are
a sample of them); true c claims labelled other are few enough not to move S_other (c is a minority category).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Optional, Sequence

import numpy as np
import polars as pl

from ..claims.annotator_error import AnnotatorError
from ..records.claims import LineageEdgeRecord
from .annotator_correction import MIN_SEPARATION, gold_rates
from .bootstrap import Bootstrap
from .propagation import (ClaimNode, category_of, children_pairs, index_chains, kaplan_meier, lineage_counts,
                          lineages, parent_fate)

MIN_PURITY = 0.1
SURVIVAL_AT = (2, 5, 10)
_OTHER = "__other__"


def _purity(q: np.ndarray, se: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """The share truly of the category among those labelled with it, from the labelled share q (Rogan–Gladen);
    NaN where the labels cannot be inverted."""
    separation = se - fp
    p = np.clip((q - fp) / separation, 0.0, 1.0)
    return np.where(separation < MIN_SEPARATION, np.nan, np.clip(se * p / q, 0.0, 1.0))


def _reinforced(nodes: Sequence[ClaimNode], edges: Sequence[LineageEdgeRecord], category: str,
                chains: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per chain: parents of `category` that were reinforced at the next hop (propagation.parent_fate, as the
    headline's reinforced share counts them), and all parents of `category` that had a next hop."""
    reinforced, parents = defaultdict(float), defaultdict(float)
    for chain in index_chains(nodes, edges).values():
        for hop in chain.hops[:-1]:
            for parent in chain.by_hop.get(hop, ()):
                if category_of(parent) != category:
                    continue
                parents[chain.chain_id] += 1
                reinforced[chain.chain_id] += parent_fate(children_pairs(chain, (hop, parent.claim_id)),
                                                          parent)["reinforced"]
    return np.array([reinforced[c] for c in chains]), np.array([parents[c] for c in chains])


def corrected_lineage_metrics(nodes: Sequence[ClaimNode], edges: Sequence[LineageEdgeRecord], error: AnnotatorError,
                              category: str, ts: Sequence[int] = SURVIVAL_AT, n_boot: int = 1000, seed: int = 0,
                              level: float = 0.95) -> pl.DataFrame:
    """Rows `survival_t<t>` for t in `ts` and `reinforced`: raw (as labelled) with its bootstrap interval, the
    purity w used, and corrected with an interval that also redraws the gold counts (see the module docstring);
    corrected is None where the category has no gold claims, cannot be inverted, or w < MIN_PURITY."""
    other = [replace(n, category=category if category_of(n) == category else _OTHER) for n in nodes]
    chains = sorted({n.chain_id for n in nodes})
    own, rest = lineages(other, edges, category), lineages(other, edges, _OTHER)
    t_max = max(ts)
    position = {c: i for i, c in enumerate(chains)}
    (d_c, r_c, _), (d_o, r_o, _) = (lineage_counts(lins, position, t_max) for lins in (own, rest))
    rf_c, p_c = _reinforced(other, edges, category, chains)
    rf_o, p_o = _reinforced(other, edges, _OTHER, chains)
    # Purity is a property of the sample it weighs: lineage births for survival (a category that outlives the rest
    # is commoner among a hop's claims than among births), claims with a next hop for the reinforced share.
    births_c = np.array([sum(lin.chain_id == c for lin in own) for c in chains], float)
    births = births_c + np.array([sum(lin.chain_id == c for lin in rest) for c in chains], float)
    rates = gold_rates(error, category)

    def estimates(weights: np.ndarray, se: np.ndarray, fp: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Raw metrics [B, M], purity [B] and corrected metrics [B, M] for chain weights [B, chains]."""
        at = [t - 1 for t in ts]   # kaplan_meier's columns are t = 1..t_max
        raw_s = kaplan_meier(weights @ d_c[:, 1:], weights @ r_c[:, 1:])[:, at]
        other_s = kaplan_meier(weights @ d_o[:, 1:], weights @ r_o[:, 1:])[:, at]
        with np.errstate(divide="ignore", invalid="ignore"):
            raw_r = (weights @ rf_c) / (weights @ p_c)
            other_r = (weights @ rf_o) / (weights @ p_o)
            w_births = _purity((weights @ births_c) / (weights @ births), se, fp)
            w_parents = _purity((weights @ p_c) / (weights @ (p_c + p_o)), se, fp)
            raw = np.column_stack([raw_s, raw_r])
            rest = np.column_stack([other_s, other_r])
            purity = np.column_stack([np.repeat(w_births[:, None], len(ts), axis=1), w_parents])
            corrected = np.clip((raw - (1 - purity) * rest) / purity, 0.0, 1.0)
        corrected = np.where((purity < MIN_PURITY) | np.isnan(purity), np.nan, corrected)
        return raw, purity, corrected

    names = [f"survival_t{t}" for t in ts] + ["reinforced"]
    ones = np.ones((1, len(chains)))
    se0 = np.array([rates.sensitivity if rates else np.nan])
    fp0 = np.array([rates.false_positive_rate if rates else np.nan])
    raw, purity, corrected = estimates(ones, se0, fp0)
    tail = [50 * (1 - level), 50 * (1 + level)]
    lo = hi = c_lo = c_hi = np.full(len(names), np.nan)
    if n_boot > 0 and chains:
        rng = np.random.default_rng(seed)
        weights = Bootstrap(n_boot, seed, level).counts(len(chains), rng)   # chains drawn with replacement
        if rates is not None:
            se = rng.binomial(rates.gold, rates.sensitivity, n_boot) / rates.gold
            fp = rng.binomial(rates.others, rates.false_positive_rate, n_boot) / max(rates.others, 1)
        else:
            se = fp = np.full(n_boot, np.nan)
        b_raw, _, b_corrected = estimates(weights, se, fp)
        with np.errstate(all="ignore"):
            lo, hi = np.nanpercentile(b_raw, tail, axis=0) if np.isfinite(b_raw).any() else (lo, hi)
            usable = np.isfinite(b_corrected).mean(axis=0) >= level
            if usable.any():
                c_lo, c_hi = np.nanpercentile(np.where(usable, b_corrected, 0.0), tail, axis=0)
                c_lo, c_hi = np.where(usable, c_lo, np.nan), np.where(usable, c_hi, np.nan)

    def value(x: float) -> Optional[float]:
        return None if x is None or not np.isfinite(x) else float(x)

    rows = [{"category": category, "metric": name, "raw": value(raw[0, k]), "raw_lo": value(lo[k]),
             "raw_hi": value(hi[k]), "purity": value(purity[0, k]), "corrected": value(corrected[0, k]),
             "corrected_lo": value(c_lo[k]) if value(corrected[0, k]) is not None else None,
             "corrected_hi": value(c_hi[k]) if value(corrected[0, k]) is not None else None,
             "n_lineages": len(own)} for k, name in enumerate(names)]
    schema = {"category": pl.Utf8, "metric": pl.Utf8, "raw": pl.Float64, "raw_lo": pl.Float64, "raw_hi": pl.Float64,
              "purity": pl.Float64, "corrected": pl.Float64, "corrected_lo": pl.Float64,
              "corrected_hi": pl.Float64, "n_lineages": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


__all__ = ["MIN_PURITY", "SURVIVAL_AT", "corrected_lineage_metrics"]
