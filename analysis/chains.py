"""Chains hop by hop: each hop's attempt against its chain's solo baseline in the same DSL (help / harm by the
benchmark's rule, `paired.compare`), the help and harm rates per hop, and whether the closures a hop received
predict harm there.

- `hop_outcomes(rows)`: one `HopOutcome` per done chain hop, paired with its chain's first baseline (replicate 0)
  in the hop's DSL; tiers and final kernel times.
- `hop_curve(outcomes)`: per hop k: n, help and harm rates, bootstrap intervals over chains.
- `closure_harm(nodes, edges, outcomes)`: per hop k ≥ 1, x = the share of hop k−1's claims in the closure category
  (what hop k received), y = harm at hop k; the harm rate for hops that received none vs some, and the slope of
  an ordinary least-squares line y = a + b·x (a linear probability model) with a bootstrap interval over chains.
  A positive slope whose interval excludes 0 says: more received closures, more harm at the next hop.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import polars as pl

from ..records import chain_id_of
from ..records.claims import LineageEdgeRecord
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
        b = base.get((cid, r["dsl"]))
        out.append(HopOutcome(chain_id=cid, hop=r["hop"], tier=_tier(r), base_tier=_tier(b),
                              skill_ms=r["f_kernel_ms"], base_ms=b["f_kernel_ms"] if b else None,
                              target=r["target"], synthetic=bool(r["synthetic"])))
    return sorted(out, key=lambda o: (o.chain_id, o.hop))


def _tier(row: Optional[dict[str, Any]]) -> Optional[str]:
    """The final tier of a completed attempt; None (neutral) for a skipped, failed-to-run or missing one."""
    return row["final_tier"] if row is not None and row["status"] == "completed" else None


def _bootstrap(per_chain: np.ndarray, n_boot: int, rng: np.random.Generator, level: float
               ) -> tuple[Optional[float], Optional[float]]:
    """Interval of sum(column 0) / sum(column 1) over chains resampled with replacement."""
    if n_boot <= 0 or len(per_chain) == 0:
        return None, None
    pick = rng.integers(0, len(per_chain), size=(n_boot, len(per_chain)))
    sums = per_chain[pick].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = sums[:, 0] / sums[:, 1]
    lo, hi = np.nanpercentile(reps, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def hop_curve(outcomes: Sequence[HopOutcome], rules: PairingRules = PairingRules(), n_boot: int = 1000, seed: int = 0,
              level: float = 0.95) -> pl.DataFrame:
    """Per hop: n (hops with an outcome), n_help, n_harm, help_rate, harm_rate and their intervals."""
    rng = np.random.default_rng(seed)
    by_hop: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for o in outcomes:
        effect = hop_effect(o, rules)
        counts = by_hop[o.hop][o.chain_id]
        counts[0] += effect == "help"
        counts[1] += effect == "harm"
        counts[2] += 1
    rows = []
    for hop in sorted(by_hop):
        per_chain = np.array(list(by_hop[hop].values()), dtype=float)
        n, h, m = per_chain[:, 2].sum(), per_chain[:, 0].sum(), per_chain[:, 1].sum()
        help_lo, help_hi = _bootstrap(per_chain[:, [0, 2]], n_boot, rng, level)
        harm_lo, harm_hi = _bootstrap(per_chain[:, [1, 2]], n_boot, rng, level)
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
        points[o.chain_id].append((share, float(hop_effect(o, rules) == "harm")))
    xy = np.array([p for ps in points.values() for p in ps], dtype=float).reshape(-1, 2)
    out: dict[str, Optional[float]] = {"n_hops": float(len(xy)), "n_chains": float(len(points))}
    none, some = xy[xy[:, 0] == 0], xy[xy[:, 0] > 0]
    out["harm_rate_none"] = float(none[:, 1].mean()) if len(none) else None
    out["harm_rate_some"] = float(some[:, 1].mean()) if len(some) else None
    out["slope"] = _slope(xy)
    out["slope_lo"] = out["slope_hi"] = None
    if n_boot > 0 and len(points) > 1 and out["slope"] is not None:
        rng = np.random.default_rng(seed)
        chains = [np.array(ps, dtype=float) for ps in points.values()]
        reps = [_slope(np.concatenate([chains[i] for i in rng.integers(0, len(chains), len(chains))]))
                for _ in range(n_boot)]
        kept = np.array([r for r in reps if r is not None])
        if kept.size:
            lo, hi = np.percentile(kept, [50 * (1 - level), 50 * (1 + level)])
            out["slope_lo"], out["slope_hi"] = float(lo), float(hi)
    return out


def _slope(xy: np.ndarray) -> Optional[float]:
    """OLS slope of column 1 on column 0; None when x does not vary."""
    if len(xy) < 2 or np.ptp(xy[:, 0]) == 0:
        return None
    x, y = xy[:, 0] - xy[:, 0].mean(), xy[:, 1] - xy[:, 1].mean()
    return float((x * y).sum() / (x * x).sum())
