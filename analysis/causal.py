"""The causal table: each intervention arm against its control, the skill arm it is the twin of (issue 29).

An intervention trial (records/intervention.py) and its control share the model, problem, replicate and target DSL
and differ in one thing: what the attempt read (a category or a claim cut, a placebo, episodes, the gate) or, for
the budget-matched solo, that it read nothing but was given the control's reading time. So the paired comparison
of the two attempts, by the benchmark's one rule (`outcomes.compare`, at the judge's measured margin), is an effect
of that one thing:

    help  = P(intervention better than control), harm = P(worse), net = help - harm   (in [-1, 1])
    d_pass = P(intervention passes) - P(control passes)
    d_T, d_H: the change in the help and harm rates against the solo base (the skill arm's T and H, recomputed
              with the intervention in place of the control) — "what does the gate do to help and harm".

Pairs. Both attempts must have run (an attempt error leaves the pair out, as a benchmark cell). An attempt skipped
for an empty hand-off (the gate or an ablation left nothing to read, or its source wrote nothing) read no skill:
it stands as its cell's solo base, which is what it would have been (MKB's rule: a skipped skill attempt is the
solo). An intervention whose hand-off was the control's exact text was not run (`identical_hand_off`): its effect
is 0 by construction; such pairs are counted (`n_identical`) and enter net, d_pass, d_T and d_H as ties, so each
row is the effect over every skill attempt of the arm. `net_changed` is net over the pairs whose hand-off changed —
what removing a category does where the skill had one.

Intervals: the one problem-clustered bootstrap (`bootstrap.Bootstrap`), every model's pairs of a problem together.
Rows: per intervention label, pooled over models and per model.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import polars as pl

from ..records.intervention import control_trial_id, parse_arm
from .bootstrap import Bootstrap
from .cells import Attempt, attempt_of
from .outcomes import PairingRules, compare

CAUSAL_COLUMNS = ("intervention", "model", "n", "n_identical", "n_changed", "help", "harm", "net", "net_lo", "net_hi",
                  "net_changed", "net_changed_lo", "net_changed_hi", "d_pass", "d_pass_lo", "d_pass_hi", "d_T",
                  "d_T_lo", "d_T_hi", "d_H", "d_H_lo", "d_H_hi", "synthetic")


@dataclass(frozen=True, slots=True)
class InterventionPair:
    """One intervention attempt with its control and the cell's solo base (None: not run); `dsl` is the pair's (target)
    DSL, `control_source` the trial whose SKILL.md the control read, `reads_skill` False for a budget-matched solo."""

    label: str
    model: str
    problem_id: str
    target: str
    intervention: Attempt
    control: Attempt
    base: Optional[Attempt]
    identical: bool
    dsl: str = ""
    control_source: Optional[str] = None
    reads_skill: bool = True


def intervention_pairs(rows: Iterable[dict[str, Any]]) -> list[InterventionPair]:
    """The resolved intervention pairs among result rows (`cells.result_rows`), in row order."""
    rows = list(rows)
    by_id = {r["trial_id"]: r for r in rows}
    out = []
    for row in rows:
        if row["kind"] != "intervention" or row["status"] == "planned":
            continue
        ref = parse_arm(row["arm_name"])
        if ref is None:
            continue
        prefix = control_trial_id(row["trial_id"], ref)
        control_row = by_id.get(prefix)
        control = attempt_of(control_row)
        base = attempt_of(by_id.get(f"{prefix.rsplit('/', 1)[0]}/solo_{row['dsl']}"))
        treated = attempt_of(row)
        if control is None or treated is None or control.failed_to_run or treated.failed_to_run:
            continue
        out.append(InterventionPair(ref.label, row["model"], row["problem_id"], row["target"], treated, control,
                                    base, treated.stop_reason == "identical_hand_off", row["dsl"],
                                    control_row["skill_from"] if control_row else None, row["arm"] == "skill"))
    return out


def _stands_for(attempt: Attempt, base: Optional[Attempt]) -> Optional[Attempt]:
    """The attempt a skill attempt counts as: itself, or its cell's solo base when it was skipped (read nothing)."""
    if attempt.skipped:
        return base if base is not None and not base.failed_to_run else None
    return attempt


def _versus(x: Optional[Attempt], y: Optional[Attempt], target: str, rules: PairingRules) -> str:
    if x is None or y is None:
        return "neutral"
    margin = rules.margin(target, x.synthetic or y.synthetic, x.kernel_ms, y.kernel_ms)
    return compare(x.passed, y.passed, x.kernel_ms, y.kernel_ms, margin)


def pair_sums(pair: InterventionPair, rules: PairingRules) -> Optional[np.ndarray]:
    """The per-pair terms summed by the table: [1, identical, changed, help, harm, changed·(help-harm), pass_x -
    pass_c, help_x - help_c vs base, harm_x - harm_c vs base]; None when the control stands for nothing."""
    control = _stands_for(pair.control, pair.base)
    if control is None:
        return None
    if pair.identical:
        return np.array([1, 1, 0, 0, 0, 0, 0, 0, 0], dtype=float)
    treated = _stands_for(pair.intervention, pair.base)
    if treated is None:
        return None
    effect = _versus(treated, control, pair.target, rules)
    help_, harm = float(effect == "help"), float(effect == "harm")
    x_vs_base = _versus(treated, pair.base, pair.target, rules) if pair.base else "neutral"
    c_vs_base = _versus(control, pair.base, pair.target, rules) if pair.base else "neutral"
    return np.array([1, 0, 1, help_, harm, help_ - harm, float(treated.passed) - float(control.passed),
                     float(x_vs_base == "help") - float(c_vs_base == "help"),
                     float(x_vs_base == "harm") - float(c_vs_base == "harm")], dtype=float)


def counted_pairs(pairs: Sequence[InterventionPair], rules: PairingRules
                  ) -> list[tuple[InterventionPair, np.ndarray]]:
    """The pairs the table counts, each with its terms (`pair_sums`): every pair whose control stands for an attempt."""
    out = []
    for pair in pairs:
        terms = pair_sums(pair, rules)
        if terms is not None:
            out.append((pair, terms))
    return out


def _ratio_interval(boot: Bootstrap, per_unit: np.ndarray, num: int, den: int,
                    rng: np.random.Generator) -> tuple[Optional[float], Optional[float]]:
    lo, hi = boot.of(per_unit, lambda s: np.where(s[:, den] > 0, s[:, num] / np.maximum(s[:, den], 1e-300),
                                                  np.nan), rng)
    return lo, hi


def causal_table(pairs: Sequence[InterventionPair], rules: PairingRules = PairingRules(),
                 boot: Bootstrap = Bootstrap()) -> pl.DataFrame:
    """One row per intervention label (pooled over models: model 'all') and per (label, model); see the module
    docstring for the columns."""
    groups: dict[tuple[str, str], dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    synthetic: dict[tuple[str, str], bool] = defaultdict(bool)
    for pair, terms in counted_pairs(pairs, rules):
        for key in ((pair.label, "all"), (pair.label, pair.model)):
            groups[key][pair.problem_id].append(terms)
            synthetic[key] |= pair.intervention.synthetic or pair.control.synthetic
    rng = boot.rng()
    rows = []
    for (label, model), by_problem in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "all",
                                                                              kv[0][1])):
        per_unit = np.array([np.sum(v, axis=0) for v in by_problem.values()])
        total = per_unit.sum(axis=0)
        n, n_identical, n_changed = total[0], total[1], total[2]
        row: dict[str, Any] = {"intervention": label, "model": model, "n": int(n), "n_identical": int(n_identical),
                               "n_changed": int(n_changed), "help": total[3] / n, "harm": total[4] / n,
                               "net": (total[3] - total[4]) / n}
        row["net_lo"], row["net_hi"] = boot.of(per_unit, lambda s: (s[:, 3] - s[:, 4]) / s[:, 0], rng)
        row["net_changed"] = total[5] / n_changed if n_changed else None
        row["net_changed_lo"], row["net_changed_hi"] = _ratio_interval(boot, per_unit, 5, 2, rng)
        for name, column in (("d_pass", 6), ("d_T", 7), ("d_H", 8)):
            row[name] = total[column] / n
            row[f"{name}_lo"], row[f"{name}_hi"] = _ratio_interval(boot, per_unit, column, 0, rng)
        row["synthetic"] = synthetic[label, model]
        rows.append(row)
    schema = {c: (pl.Utf8 if c in ("intervention", "model") else pl.Int64 if c.startswith("n") and "net" not in c
                  else pl.Boolean if c == "synthetic" else pl.Float64) for c in CAUSAL_COLUMNS}
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
