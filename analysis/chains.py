"""Chains hop by hop: each hop's attempt against its chain's solo baseline in the same DSL (help / harm by the
benchmark's rule, `paired.compare`), the help and harm rates per hop, and whether the closures a hop received
predict harm there.

- `hop_outcomes(rows)`: one `HopOutcome` per done chain hop, paired with its chain's first baseline (replicate 0)
  in the hop's DSL (a gated chain's, with its ungated twin's); tiers and final kernel times.
- `hop_curve(outcomes)`: per hop k: n, help and harm rates, bootstrap intervals resampling the chains'
  problems (`bootstrap.Bootstrap`).
- `closure_harm(nodes, edges, outcomes)`: per hop k ≥ 1, x = the share of hop k−1's claims in the closure category
  (what hop k received), y = harm at hop k; the harm rate for hops that received none vs some, and the slope of
  an ordinary least-squares line y = a + b·x (a linear probability model) with a bootstrap interval resampling problems.
  A positive slope whose interval excludes 0 says: more received closures, more harm at the next hop.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import polars as pl

from ..records import chain_id_of, hop_bucket
from ..records.intervention import chain_variant, parse_arm
from ..records.claims import LineageEdgeRecord
from .bootstrap import Bootstrap, ratio
from .paired import PairingRules
from .propagation import ClaimNode, HopOutcome, hop_effect


def hop_outcomes(rows: Iterable[dict[str, Any]]) -> list[HopOutcome]:
    """The chain hops among `rows` (analysis.cells.result_rows) that ran, each with its chain's baseline."""
    rows = list(rows)
    base = {(chain_id_of(r["model"], r["problem_id"], r["chain"]), r["dsl"]): r for r in rows
            if r["kind"] == "chain_base" and r["chain"] is not None and r["replicate"] == 0
            and r["status"] != "planned"}
    out = []
    for r in rows:
        if r["kind"] != "chain_hop" or r["chain"] is None or r["hop"] is None or r["status"] == "planned":
            continue
        cid = chain_id_of(r["model"], r["problem_id"], r["chain"])
        b = base.get((_baseline_chain(r, cid), r["dsl"]))
        out.append(HopOutcome(chain_id=cid, hop=r["hop"], tier=_tier(r), base_tier=_tier(b),
                              skill_ms=r["f_kernel_ms"], base_ms=b["f_kernel_ms"] if b else None,
                              target=r["target"], synthetic=bool(r["synthetic"])))
    return sorted(out, key=lambda o: (o.chain_id, o.hop))


def chain_variants(rows: Iterable[dict[str, Any]]) -> dict[str, str]:
    """chain id -> its intervention token ('' for a plain chain; records/intervention.chain_variant), from result
    rows (`cells.result_rows`)."""
    return {chain_id_of(r["model"], r["problem_id"], r["chain"]): chain_variant(r["arm_name"])
            for r in rows if r["kind"] == "chain_hop" and r["chain"] is not None}


def kind_hop_table(rows: Sequence[dict[str, Any]], rules: PairingRules = PairingRules(), n_boot: int = 1000,
                   seed: int = 0) -> pl.DataFrame:
    """Help and harm per hop bucket for each kind of chain — plain, and each twin (`gate-remove`, `episodic`,
    `probe...`) — against the (twin's) solo baseline: distilled hand-offs against episodes or the gate, hop by hop.
    Columns: chain_kind, hops (the bucket's label) and hop_curve's; empty when the run has only plain chains."""
    variants = chain_variants(rows)
    if not any(variants.values()):
        return pl.DataFrame()
    outcomes = hop_outcomes(rows)
    parts = []
    for variant in sorted(set(variants.values()), key=lambda v: (v != "", v)):
        mine = [o for o in outcomes if variants.get(o.chain_id) == variant]
        if not mine:
            continue
        labels = {hop_bucket(o.hop) for o in mine}
        curve = hop_curve([replace(o, hop=hop_bucket(o.hop)[0]) for o in mine], rules, n_boot, seed)
        names = dict(labels)
        parts.append(curve.with_columns(pl.lit(variant or "plain").alias("chain_kind"),
                                        pl.col("hop").replace_strict(names, return_dtype=pl.Utf8).alias("hops")))
    return pl.concat(parts).select("chain_kind", "hops", pl.exclude("chain_kind", "hops", "hop"))


def _baseline_chain(row: dict[str, Any], chain_id: str) -> str:
    """The chain whose baselines a hop pairs with: its own, or for a gated chain's hop its ungated twin's (gated
    chains plan no baselines of their own: records/intervention.py)."""
    ref = parse_arm(row.get("arm_name"))
    twin = ref.twin_chain if ref is not None else None
    return chain_id if twin is None else chain_id_of(row["model"], row["problem_id"], twin)


def _tier(row: Optional[dict[str, Any]]) -> Optional[str]:
    """The final tier of a completed attempt; None (neutral) for a skipped, failed-to-run or missing one."""
    return row["final_tier"] if row is not None and row["status"] == "completed" else None


def problem_of_chain(chain_id: str) -> str:
    """The problem of a chain id (`<model>/<family>/<problem>/chain<c>`, records.chain_id_of): the bootstrap's unit
    for chain metrics — chains of one problem share its difficulty, whichever model ran them. An id of another
    form is its own unit."""
    parts = chain_id.split("/")
    return "/".join(parts[-3:-1]) if len(parts) >= 4 and parts[-1].startswith("chain") else chain_id


def hop_curve(outcomes: Sequence[HopOutcome], rules: PairingRules = PairingRules(), n_boot: int = 1000, seed: int = 0,
              level: float = 0.95) -> pl.DataFrame:
    """Per hop: n (hops with an outcome), n_help, n_harm, help_rate, harm_rate and their intervals."""
    boot = Bootstrap(n_boot, seed, level)
    rng = boot.rng()
    by_hop: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for o in outcomes:
        effect = hop_effect(o, rules)
        counts = by_hop[o.hop][problem_of_chain(o.chain_id)]
        counts[0] += effect == "help"
        counts[1] += effect == "harm"
        counts[2] += 1
    rows = []
    for hop in sorted(by_hop):
        per_problem = np.array(list(by_hop[hop].values()), dtype=float)
        n, h, m = per_problem[:, 2].sum(), per_problem[:, 0].sum(), per_problem[:, 1].sum()
        help_lo, help_hi = boot.of(per_problem, ratio(0, 2), rng)
        harm_lo, harm_hi = boot.of(per_problem, ratio(1, 2), rng)
        rows.append({"hop": hop, "n": int(n), "n_help": int(h), "n_harm": int(m), "help_rate": h / n,
                     "help_lo": help_lo, "help_hi": help_hi, "harm_rate": m / n, "harm_lo": harm_lo,
                     "harm_hi": harm_hi})
    schema = {"hop": pl.Int64, "n": pl.Int64, "n_help": pl.Int64, "n_harm": pl.Int64, "help_rate": pl.Float64,
              "help_lo": pl.Float64, "help_hi": pl.Float64, "harm_rate": pl.Float64, "harm_lo": pl.Float64,
              "harm_hi": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def closure_harm(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord], outcomes: Sequence[HopOutcome],
                 category: str = "unsupported_closure", rules: PairingRules = PairingRules(), n_boot: int = 1000,
                 seed: int = 0, level: float = 0.95) -> dict[str, Optional[float]]:
    """Does the share of closures a hop received predict harm there? (See the module docstring.) Hops whose
    received SKILL.md has no claims, and chains' first hops, are left out. `edges` are not needed for the share
    (it counts hop k−1's claims) but keep the signature of the other lineage metrics."""
    del edges
    claims: dict[tuple[str, int], list[ClaimNode]] = defaultdict(list)
    for n in nodes:
        claims[n.chain_id, n.hop].append(n)
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for o in outcomes:
        received = claims.get((o.chain_id, o.hop - 1))
        if o.hop < 1 or not received:
            continue
        share = sum(n.category == category for n in received) / len(received)
        points[problem_of_chain(o.chain_id)].append((share, float(hop_effect(o, rules) == "harm")))
    xy = np.array([p for ps in points.values() for p in ps], dtype=float).reshape(-1, 2)
    n_chains = len({o.chain_id for o in outcomes if o.hop >= 1 and claims.get((o.chain_id, o.hop - 1))})
    out: dict[str, Optional[float]] = {"n_hops": float(len(xy)), "n_chains": float(n_chains)}
    none, some = xy[xy[:, 0] == 0], xy[xy[:, 0] > 0]
    out["harm_rate_none"] = float(none[:, 1].mean()) if len(none) else None
    out["harm_rate_some"] = float(some[:, 1].mean()) if len(some) else None
    out["slope"] = _slope(xy)
    out["slope_lo"] = out["slope_hi"] = None
    if n_boot > 0 and len(points) > 1 and out["slope"] is not None:
        # The slope is a function of per-problem sums (n, Σx, Σy, Σxy, Σx²), so a resample is one matrix product.
        per_problem = np.array([[len(a), a[:, 0].sum(), a[:, 1].sum(), (a[:, 0] * a[:, 1]).sum(), (a[:, 0] ** 2).sum()]
                                for a in (np.array(ps, dtype=float) for ps in points.values())])
        boot = Bootstrap(n_boot, seed, level)
        out["slope_lo"], out["slope_hi"] = boot.of(per_problem, _slope_of_sums, boot.rng())
    return out


def _slope_of_sums(sums: np.ndarray) -> np.ndarray:
    """OLS slopes from resampled sums (n, Σx, Σy, Σxy, Σx²); NaN where x does not vary."""
    n, sx, sy, sxy, sxx = (sums[:, i] for i in range(5))
    spread = sxx - sx * sx / n
    return np.where(spread > 1e-12 * np.maximum(sxx, 1.0), (sxy - sx * sy / n) / spread, np.nan)


def _slope(xy: np.ndarray) -> Optional[float]:
    """OLS slope of column 1 on column 0; None when x does not vary."""
    if len(xy) < 2 or np.ptp(xy[:, 0]) == 0:
        return None
    x, y = xy[:, 0] - xy[:, 0].mean(), xy[:, 1] - xy[:, 1].mean()
    return float((x * y).sum() / (x * x).sum())
