"""The paired units of the benchmark: for one model, problem, direction (source DSL → target DSL) and replicate,
the three attempts of a cell-replicate — source (solo in the source DSL), base (solo in the target DSL) and skill
(in the target DSL, conditioned on the source's SKILL.md). Every single-hop metric is computed from these.

`result_rows(store)` reads the trial rows with their final verdict (the one query `mkb export` and `mkb report` share);
`attempt_of(row)` and `cell_replicates(rows)` are pure. Benchmark trials only (`kind == "benchmark"`): chain hops pair
with their chain's baselines instead (`analysis/chains.py`).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from ..store import RunStore

DSLS: tuple[str, str] = ("cutedsl", "tirx")
DIRECTIONS: tuple[str, ...] = ("cutedsl2tirx", "tirx2cutedsl")
PASSING = frozenset({"pass", "pass2x"})
TIER_RANK = {"fail": 0, "pass": 1, "pass2x": 2}

RESULT_COLUMNS = ("trial_id", "model", "problem_id", "dsl", "target", "arm", "kind", "replicate", "chain", "hop",
                  "skill_from", "arm_name", "status", "final_tier", "synthetic", "error", "stop_reason",
                  "n_submissions", "counted_submissions", "prompt_tokens", "completion_tokens", "cached_tokens",
                  "cost_usd", "wall_s", "f_compiled", "f_correct", "f_speedup", "f_kernel_ms", "f_eager_ms",
                  "skill_sha")
_RESULT_SQL = (
    "SELECT t.trial_id, t.model, t.problem_id, t.dsl, t.target, t.arm, t.kind, t.replicate, t.chain, t.hop, "
    "t.skill_from, t.arm_name, t.status, t.final_tier, t.synthetic, t.error, t.stop_reason, t.n_submissions, "
    "t.counted_submissions, t.prompt_tokens, t.completion_tokens, t.cached_tokens, t.cost_usd, t.wall_s, "
    "s.compiled, s.correct, s.speedup, s.kernel_ms, s.eager_ms, t.skill_sha "
    "FROM trials t LEFT JOIN submissions s ON s.trial_id = t.trial_id AND s.is_final = 1 ORDER BY t.plan_order")


def result_rows(store: RunStore) -> list[dict[str, Any]]:
    """Every trial of the run with its final verdict's figures (None where it has none), in plan order, with
    `arm_name` filled in for trials planned without one (solo_<dsl>, <source>2<target>_skill)."""
    rows = [dict(zip(RESULT_COLUMNS, r)) for r in store.connection.execute(_RESULT_SQL)]
    dsl_of = {r["trial_id"]: r["dsl"] for r in rows}
    for row in rows:
        if not row["arm_name"]:
            row["arm_name"] = (f"solo_{row['dsl']}" if row["arm"] == "solo"
                               else f"{dsl_of.get(row['skill_from'] or '', 'unknown')}2{row['dsl']}_skill")
    return rows


@dataclass(frozen=True, slots=True)
class Attempt:
    """One stored attempt as the metrics read it. `status`: completed | skipped | error | infra_error."""

    trial_id: str
    status: str
    tier: Optional[str] = None
    speedup: Optional[float] = None
    kernel_ms: Optional[float] = None
    eager_ms: Optional[float] = None
    skill_sha: Optional[str] = None
    stop_reason: Optional[str] = None
    error: Optional[str] = None
    compiled: Optional[bool] = None      # the final verdict's (None: no final verdict)
    correct: Optional[bool] = None
    synthetic: bool = False              # judged by the synthetic judge (drawn times, not measured ones)

    @property
    def passed(self) -> bool:
        return self.status == "completed" and self.tier in PASSING

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"

    @property
    def failed_to_run(self) -> bool:
        """The attempt itself errored (model endpoint down, crashed worker): no verdict to compare."""
        return self.status in ("error", "infra_error")

    @property
    def rank(self) -> int:
        """fail (or no verdict) 0 < pass 1 < pass2x 2, for relative standing."""
        return TIER_RANK.get(self.tier or "fail", 0) if self.status == "completed" else 0


def attempt_of(row: Optional[dict[str, Any]]) -> Optional[Attempt]:
    """The attempt of a result row; None while the trial has not run."""
    if row is None or row["status"] == "planned":
        return None
    return Attempt(trial_id=row["trial_id"], status=row["status"], tier=row["final_tier"],
                   speedup=row["f_speedup"], kernel_ms=row["f_kernel_ms"], eager_ms=row["f_eager_ms"],
                   skill_sha=row.get("skill_sha"), stop_reason=row["stop_reason"], error=row["error"],
                   compiled=_flag(row.get("f_compiled")), correct=_flag(row.get("f_correct")),
                   synthetic=bool(row.get("synthetic")))


def _flag(value: Any) -> Optional[bool]:
    return None if value is None else bool(value)


@dataclass(frozen=True, slots=True)
class CellReplicate:
    """source/base/skill: None while not run. `resolved`: all three ran without an attempt error (MKB's rule)."""

    model: str
    target: str
    problem_id: str
    family: str
    direction: str
    replicate: int
    source: Optional[Attempt]
    base: Optional[Attempt]
    skill: Optional[Attempt]

    @property
    def source_dsl(self) -> str:
        return self.direction.split("2")[0]

    @property
    def target_dsl(self) -> str:
        return self.direction.split("2")[1]

    @property
    def resolved(self) -> bool:
        return all(a is not None and not a.failed_to_run for a in (self.source, self.base, self.skill))

    @property
    def cell_key(self) -> tuple[str, str, str, str]:
        """What identifies the cell across replicates: (model, target, problem, direction)."""
        return (self.model, self.target, self.problem_id, self.direction)


def family_of(problem_id: str) -> str:
    family, _, _ = problem_id.rpartition("/")
    return family or "unknown"


def cell_replicates(rows: Iterable[dict[str, Any]]) -> list[CellReplicate]:
    """Every (model, target, problem, direction, replicate) with at least one of its benchmark trials run, in a
    stable order (model, target, problem, direction, replicate).

    A cell's target is that of its base and skill attempts (both in the target DSL). The source only hands over
    its SKILL.md and its tier, so it is taken from the same target when there is one, else from the other: on a
    machine without a GPU the quickstart's CuTe DSL solos are judged on the GPU target (compile only) and its TIRx
    ones on the CPU target, and a cutedsl2tirx cell there is (cutedsl solo @gpu, tirx solo @cpu, skill @cpu)."""
    arms: dict[tuple[str, str], dict[tuple[int, str], dict[str, dict[str, Any]]]] = defaultdict(dict)
    for row in rows:
        if row["kind"] == "benchmark":
            arms[row["model"], row["problem_id"]].setdefault((row["replicate"], row["arm_name"]), {})[
                row["target"]] = row
    out = []
    for (model, problem_id), by_arm in arms.items():
        numbers = sorted({r for (r, _), by_target in by_arm.items()
                          if any(row["status"] != "planned" for row in by_target.values())})
        for direction in DIRECTIONS:
            source, dst = direction.split("2")
            for n in numbers:
                base_rows = by_arm.get((n, f"solo_{dst}"), {})
                skill_rows = by_arm.get((n, f"{direction}_skill"), {})
                source_rows = by_arm.get((n, f"solo_{source}"), {})
                for target in sorted(set(base_rows) | set(skill_rows)):
                    src = source_rows.get(target) or next(iter(source_rows.values()), None)
                    out.append(CellReplicate(model, target, problem_id, family_of(problem_id), direction, n,
                                             attempt_of(src), attempt_of(base_rows.get(target)),
                                             attempt_of(skill_rows.get(target))))
    return sorted(out, key=lambda c: (c.model, c.target, c.problem_id, c.direction, c.replicate))


def group_key(cr: CellReplicate, by: Sequence[str]) -> tuple[str, ...]:
    """The values of `by` (model, target, direction, family) for one cell-replicate."""
    values = {"model": cr.model, "target": cr.target, "direction": cr.direction, "family": cr.family}
    unknown = [k for k in by if k not in values]
    if unknown:
        raise ValueError(f"cannot group by {unknown}: choose from {sorted(values)}")
    return tuple(values[k] for k in by)
