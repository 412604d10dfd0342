"""Gated against ungated chains (issue 29): does the verification gate stop unsupported closures from propagating,
and what does it cost in help?

A gated chain is the twin of a plain chain (same model, problem, start DSL; records/intervention.py) whose every hop
k >= 1 read hop k-1's SKILL.md with the claims its verdicts do not back removed or marked. Per chain group (`gate`:
none for the plain chains, remove, mark; containment probes are left to analysis/containment.py), from what
`mkb lineage` stored and the hops' outcomes:

- closure survival at 1 and 2 hops: the Kaplan-Meier share of closure lineages (claims of the closure category born
  at a hop) with a live descendant 1 and 2 hops on (`propagation.survival`, bootstrap over chains);
- closure share: the mean over chains of the closure category's share of the last hop's claims
  (`propagation.prevalence`), and its mean over every hop >= 1;
- help and harm: each hop k >= 1 against its chain's solo baseline (a gated chain's: its twin's), the benchmark's
  rule (`chains.hop_outcomes`); intervals resample problems (`bootstrap.Bootstrap`), d_help / d_harm the gated group's
  rate minus the ungated one's, resampling problems for both at once.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import polars as pl

from .bootstrap import Bootstrap
from .chains import problem_of_chain
from .lineage_data import LineageData
from .paired import PairingRules
from .propagation import hop_effect, prevalence, survival

UNGATED = "none"
GATE_COLUMNS = ("gate", "chains", "survival_1", "survival_1_lo", "survival_1_hi", "survival_2", "survival_2_lo",
                "survival_2_hi", "closure_share_last", "closure_share_last_lo", "closure_share_last_hi",
                "closure_share_mean", "hops", "help", "help_lo", "help_hi", "harm", "harm_lo", "harm_hi", "d_help",
                "d_help_lo", "d_help_hi", "d_harm", "d_harm_lo", "d_harm_hi")


def _label(variant: str) -> str:
    return variant.removeprefix("gate-") or UNGATED


def _at(frame: pl.DataFrame, gate: str, column: str, **where: Any) -> tuple[Optional[float], ...]:
    """(value, lo, hi) of `column` in the row of `frame` for this chain variant (and `where`), or Nones."""
    rows = frame.filter(pl.col("variant") == gate) if "variant" in frame.columns else frame.clear()
    for key, value in where.items():
        rows = rows.filter(pl.col(key) == value)
    if rows.is_empty():
        return (None, None, None)
    row = rows.row(0, named=True)
    return (row[column], row.get(f"{column}_lo"), row.get(f"{column}_hi"))


def _outcome_sums(lineage: LineageData, gates: Mapping[str, str], rules: PairingRules
                  ) -> dict[str, dict[str, np.ndarray]]:
    """gate -> problem -> [help, harm, hops] over the hops k >= 1 of its chains."""
    sums: dict[str, dict[str, np.ndarray]] = defaultdict(lambda: defaultdict(lambda: np.zeros(3)))
    for o in lineage.outcomes:
        if o.hop < 1 or o.chain_id not in gates:
            continue
        effect = hop_effect(o, rules)
        sums[gates[o.chain_id]][problem_of_chain(o.chain_id)] += (effect == "help", effect == "harm", 1)
    return sums


def gate_chain_table(lineage: LineageData, variants: Mapping[str, str], rules: PairingRules = PairingRules(),
                     category: Optional[str] = None, n_boot: int = 1000, seed: int = 0) -> pl.DataFrame:
    """One row per chain group (`variants`: chain id -> '' / 'gate-remove' / 'gate-mark'; other variants are left
    out), the plain group first; see the module docstring. Empty when the run has no gated chain."""
    gates = {c: v for c, v in variants.items() if v == "" or v.startswith("gate-")}
    if not any(gates.values()):
        return pl.DataFrame(schema={c: pl.Utf8 if c == "gate" else pl.Float64 for c in GATE_COLUMNS})
    from .propagation import _closure_category

    category = category or _closure_category()
    surv = survival(lineage.nodes, lineage.edges, category, by=("variant",), n_boot=n_boot, seed=seed)
    prev = prevalence(lineage.nodes, [category], by=("variant",), n_boot=n_boot, seed=seed)
    prev = prev.filter(pl.col("category") == category)
    outcomes = _outcome_sums(lineage, gates, rules)
    boot = Bootstrap(n_boot, seed)
    problems = sorted({p for by_problem in outcomes.values() for p in by_problem})
    base = _matrix(outcomes.get("", {}), problems)
    rows = []
    for gate in sorted(set(gates.values()), key=lambda g: (g != "", g)):
        row: dict[str, Any] = {"gate": _label(gate), "chains": sum(1 for g in gates.values() if g == gate)}
        for t in (1, 2):
            value, lo, hi = _at(surv.rename({"survival": "s", "survival_lo": "s_lo", "survival_hi": "s_hi"}),
                                gate, "s", t=t)
            row[f"survival_{t}"], row[f"survival_{t}_lo"], row[f"survival_{t}_hi"] = value, lo, hi
        mine = prev.filter(pl.col("variant") == gate) if "variant" in prev.columns else prev.clear()
        if mine.is_empty():
            row.update(closure_share_last=None, closure_share_last_lo=None, closure_share_last_hi=None,
                       closure_share_mean=None)
        else:
            last = mine.filter(pl.col("hop") == mine["hop"].max()).row(0, named=True)
            row.update(closure_share_last=last["share"], closure_share_last_lo=last.get("share_lo"),
                       closure_share_last_hi=last.get("share_hi"),
                       closure_share_mean=float(mine.filter(pl.col("hop") >= 1)["share"].mean() or 0.0))
        own = _matrix(outcomes.get(gate, {}), problems)
        total = own.sum(axis=0)
        row["hops"] = int(total[2])
        rng = boot.rng()
        for name, column in (("help", 0), ("harm", 1)):
            row[name] = total[column] / total[2] if total[2] else None
            row[f"{name}_lo"], row[f"{name}_hi"] = boot.of(own, lambda s, c=column: s[:, c] / s[:, 2], rng) \
                if total[2] else (None, None)
            if gate and total[2] and base.sum(axis=0)[2]:
                both = np.concatenate([own, base], axis=1)
                diff = base.sum(axis=0)
                row[f"d_{name}"] = total[column] / total[2] - diff[column] / diff[2]
                row[f"d_{name}_lo"], row[f"d_{name}_hi"] = boot.of(
                    both, lambda s, c=column: s[:, c] / s[:, 2] - s[:, 3 + c] / s[:, 5], rng)
            else:
                row[f"d_{name}"] = row[f"d_{name}_lo"] = row[f"d_{name}_hi"] = None
        rows.append(row)
    schema = {c: (pl.Utf8 if c == "gate" else pl.Int64 if c in ("chains", "hops") else pl.Float64)
              for c in GATE_COLUMNS}
    return pl.DataFrame(rows, schema=schema)


def _matrix(by_problem: Mapping[str, np.ndarray], problems: Sequence[str]) -> np.ndarray:
    """[problems, 3]: a group's per-problem sums, zeros where it has none (so two groups resample together)."""
    return np.array([by_problem.get(p, np.zeros(3)) for p in problems], dtype=float).reshape(len(problems), 3)
