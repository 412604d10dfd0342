"""Exports of a run store: parquet tables (polars) and MetaKernelBench-compatible per-model `results.json`.

Parquet (`export_parquet`): one file per table — trials, submissions, usage, skills, artifacts, events — with the
store's columns (see `sqlite_store`'s schema; booleans as Boolean, `depends_on` as a list of ids) and a `synthetic`
column in every table (a child row takes its trial's flag; an event its trial's, else the run's), plus
`meta.json` (the run's resolved config), so synthetic numbers are labelled wherever they travel. The claim tables
— claims, annotations, lineage_edges — are written too when they hold rows; as they are keyed by SKILL.md text, not
by trial, their `synthetic` is the run's flag or that of any trial that wrote the claim's text.

results.json (`export_results_json`): the format MetaKernelBench itself writes to `results/<model>/results.json`
(arXiv 2610.05014; github.com/YIGE24/MetaKernelBench, `metakernelbench/results.py`, `write_results`):
    {legend, model, harbor_version, overall, cells: [{cell, <metrics>, replicates: [{resolved, n_replicate,
     source, base, skill}]}]}
where each of source/base/skill is MKB's TrialRecord — {rewards: {imported, correct, speedup_vs_eager, passed},
timed_out, error, skipped, usage: {n_input_tokens, n_cache_tokens, n_output_tokens, cost_usd, agent_sec}} or
null — and <metrics> are MKB's: n_cell_replicates, n_resolved, source_coverage, skill_coverage, base/skill/lift
ladders (R@0, R@0.5, R@1, R@2, R@4, S), with_skill, by_source_verdict, usage per arm; `overall` adds n_cells,
by_direction and by_category (our family). Cells come from the benchmark trials (`kind == "benchmark"`). Our
verdict maps to MKB rewards as: imported = compiled, correct = correct, passed = tier in (pass, pass2x),
speedup_vs_eager = speedup when passed else 0 (a compile_only verdict counts as not passed); timed_out = the
attempt stopped on the wall clock; an error / infra_error trial is MKB's `error` (unresolved), a skipped one MKB's
`skipped`. harbor_version is null (no Harbor here). Our additions, as extra top-level keys MKB readers ignore:
schema, generator, synthetic, target, generated_at, source_run, `attempts` (every done trial of the model —
chain hops included — once, with its tier and figures) and `summary` (per arm: n, pass rate, pass2x rate).
A model with trials on both targets gets `<model>/results.json` (gpu) and `<model>@cpu/results.json`: CPU results
are never mixed into GPU ones.
"""
from __future__ import annotations

import json
import os
import re
import statistics
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Optional

from .sqlite_store import RunStore

RESULTS_SCHEMA = "mkb-ray/results-json/1"
DSLS = ("cutedsl", "tirx")
SPEED_THRESHOLDS = (0.0, 0.5, 1.0, 2.0, 4.0)   # MKB's R@t ladder
BOOLEAN_COLUMNS = {"synthetic", "is_final", "counted", "compiled", "correct", "ok"}
_POLARS_TYPES = {"INTEGER": "Int64", "REAL": "Float64", "TEXT": "Utf8"}

# SELECTs of the exported tables. Each ends with a `synthetic` column: the row's trial's flag, or the run's (a
# trial not run yet in a synthetic run is synthetic too). `{trial_columns}` is the trials table without it.
_SYNTHETIC = "MAX(t.synthetic, :run_synthetic)"
_TABLE_SQL = {
    "trials": f"SELECT {{trial_columns}}, {_SYNTHETIC} AS synthetic FROM trials t ORDER BY t.plan_order",
    "submissions": f"SELECT c.*, {_SYNTHETIC} AS synthetic FROM submissions c JOIN trials t USING (trial_id) "
                   "ORDER BY t.plan_order, c.idx",
    "usage": f"SELECT c.*, {_SYNTHETIC} AS synthetic FROM usage c JOIN trials t USING (trial_id) "
             "ORDER BY t.plan_order, c.idx",
    "skills": f"SELECT c.*, {_SYNTHETIC} AS synthetic FROM skills c JOIN trials t USING (trial_id) "
              "ORDER BY t.plan_order",
    "artifacts": f"SELECT c.*, {_SYNTHETIC} AS synthetic FROM artifacts c JOIN trials t USING (trial_id) "
                 "ORDER BY t.plan_order, c.name",
    "events": f"SELECT e.*, COALESCE({_SYNTHETIC}, :run_synthetic) AS synthetic FROM events e "
              "LEFT JOIN trials t USING (trial_id) ORDER BY e.id",
}
# The claim tables, written only when they hold rows. A claim's text may come from several trials: it is synthetic
# when the run is, or when any trial that wrote this text is. Claims by text, their annotations and edges by claim.
_SKILL_SYNTHETIC = ("WITH syn AS (SELECT skill_sha, MAX(synthetic) AS synthetic FROM trials "
                    "WHERE skill_sha IS NOT NULL GROUP BY skill_sha) ")
_CLAIM_SYNTHETIC = "MAX(COALESCE(syn.synthetic, 0), :run_synthetic) AS synthetic"
_CLAIM_TABLE_SQL = {
    "claims": f"{_SKILL_SYNTHETIC}SELECT c.*, {_CLAIM_SYNTHETIC} FROM claims c LEFT JOIN syn USING (skill_sha) "
              "ORDER BY c.skill_sha, c.idx",
    "annotations": f"{_SKILL_SYNTHETIC}SELECT a.*, {_CLAIM_SYNTHETIC} FROM annotations a "
                   "LEFT JOIN claims c USING (claim_id) LEFT JOIN syn ON syn.skill_sha = c.skill_sha "
                   "ORDER BY a.annotator, a.taxonomy, a.claim_id",
    "lineage_edges": f"{_SKILL_SYNTHETIC}SELECT e.*, {_CLAIM_SYNTHETIC} FROM lineage_edges e "
                     "LEFT JOIN claims c ON c.claim_id = e.child_id LEFT JOIN syn ON syn.skill_sha = c.skill_sha "
                     "ORDER BY e.chain_id, e.matcher, e.hop, e.child_id, e.parent_id",
}

MKB_LEGEND = {
    "arms": "solo_<dsl> attempts the problem in that DSL from scratch and distills SKILL.md as it goes; "
            "<a>2<b>_skill attempts it in DSL b from scratch with solo_<a>'s SKILL.md attached to the instruction",
    "records": "per cell and replicate: source is the solo in the source DSL, base the solo in the target DSL (the "
               "no-skill baseline), skill the attached attempt; resolved means all three hold a verdict; a skill "
               "record marked skipped was never run because its source wrote no SKILL.md",
    "rates": "R@t is the share of resolved cell-replicates that passed with a speedup over torch eager of at "
             "least t (R@0 is the pass rate, R@1 the eager-matching rate), and S is 100 times the mean over the five "
             "thresholds; lift is skill minus base, where a skipped skill arm counts as its base since nothing was "
             "transferred; with_skill repeats the contrast on the cell-replicates whose source wrote a SKILL.md; "
             "by_source_verdict splits the contrast by whether the source solo passed",
    "source_coverage": "the share of resolved cell-replicates whose source solo passed",
    "skill_coverage": "the share of resolved cell-replicates whose source solo wrote a SKILL.md",
    "usage": "per arm over every trial holding a measured record, each trial counted once: trials counted, summed "
             "cost in USD and tokens (input including cache, cache, output) as the model calls reported them, and "
             "the mean agent wall time in seconds; a sum is null when any counted record lacks that number",
    "rewards (mkb-ray)": "imported = the kernel compiled; correct = the final verdict was correct; passed = tier "
                         "pass or pass2x; speedup_vs_eager = the final verdict's speedup when passed, else 0; a "
                         "compile_only verdict (judged without a GPU) counts as not passed",
    "attempts (mkb-ray)": "every done trial of this model once (benchmark arms and chain hops), with the final "
                          "verdict's tier, correctness, speedup and times, submissions, tokens and cost",
    "summary (mkb-ray)": "per arm: n done trials, n_scored (status completed), pass_rate and pass2x_rate over "
                         "n_scored (null when none)",
}


# -- parquet ----------------------------------------------------------------------------------------------------
def export_parquet(run_dir: Path, out_dir: Path) -> dict[str, Path]:
    """Write every store table as `<out_dir>/<table>.parquet` (+ `meta.json`; the claim tables only when they
    hold rows); returns {table: path}."""
    import polars as pl

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    with RunStore(Path(run_dir), readonly=True) as store:
        conn = store.connection
        meta = store.meta()
        run_synthetic = int(bool(meta.get("synthetic", False)))
        conn.execute("BEGIN")  # one snapshot for every table, even while the driver writes
        try:
            for table, sql in _TABLE_SQL.items():
                declared = {r[1]: r[2] for r in conn.execute(f"PRAGMA table_info({table})")}
                trial_columns = ", ".join(f"t.{c}" for c in declared if c != "synthetic")
                cursor = conn.execute(sql.format(trial_columns=trial_columns), {"run_synthetic": run_synthetic})
                columns = [d[0] for d in cursor.description]
                rows = cursor.fetchall()
                schema = {c: _polars_type(pl, c, declared.get(c, "INTEGER")) for c in columns}
                if table == "trials":
                    schema["depends_on"] = pl.List(pl.Utf8)
                    at = columns.index("depends_on")
                    rows = [r[:at] + (json.loads(r[at]),) + r[at + 1:] for r in rows]
                frame = pl.DataFrame(rows, schema=schema, orient="row")
                written[table] = _atomic(out_dir / f"{table}.parquet", frame.write_parquet)
            present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table, sql in _CLAIM_TABLE_SQL.items():
                if table not in present or conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None:
                    continue
                declared = {r[1]: r[2] for r in conn.execute(f"PRAGMA table_info({table})")}
                cursor = conn.execute(sql, {"run_synthetic": run_synthetic})
                columns = [d[0] for d in cursor.description]
                schema = {c: _polars_type(pl, c, declared.get(c, "INTEGER")) for c in columns}
                frame = pl.DataFrame(cursor.fetchall(), schema=schema, orient="row")
                written[table] = _atomic(out_dir / f"{table}.parquet", frame.write_parquet)
        finally:
            conn.execute("COMMIT")
    meta_path = out_dir / "meta.json"
    _atomic(meta_path, lambda p: Path(p).write_text(json.dumps(meta, indent=2, default=str)))
    written["meta"] = meta_path
    return written


def _polars_type(pl: Any, column: str, declared: str) -> Any:
    if column in BOOLEAN_COLUMNS:
        return pl.Boolean
    return getattr(pl, _POLARS_TYPES.get(declared.upper(), "Utf8"))


def _atomic(path: Path, write: Any) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
    return path


# -- results.json -----------------------------------------------------------------------------------------------
_RESULT_COLUMNS = ("trial_id", "model", "problem_id", "dsl", "target", "arm", "kind", "replicate", "chain", "hop",
                   "skill_from", "arm_name", "status", "final_tier", "synthetic", "error", "stop_reason",
                   "n_submissions", "counted_submissions", "prompt_tokens", "completion_tokens", "cached_tokens",
                   "cost_usd", "wall_s", "f_compiled", "f_correct", "f_speedup", "f_kernel_ms", "f_eager_ms")
_RESULT_SQL = (
    "SELECT t.trial_id, t.model, t.problem_id, t.dsl, t.target, t.arm, t.kind, t.replicate, t.chain, t.hop, "
    "t.skill_from, t.arm_name, t.status, t.final_tier, t.synthetic, t.error, t.stop_reason, t.n_submissions, "
    "t.counted_submissions, t.prompt_tokens, t.completion_tokens, t.cached_tokens, t.cost_usd, t.wall_s, "
    "s.compiled, s.correct, s.speedup, s.kernel_ms, s.eager_ms "
    "FROM trials t LEFT JOIN submissions s ON s.trial_id = t.trial_id AND s.is_final = 1 ORDER BY t.plan_order")


def export_results_json(run_dir: Path, out_dir: Path) -> list[Path]:
    """Write `<out_dir>/<model>/results.json` for every model of the run (see the module docstring)."""
    out_dir = Path(out_dir)
    with RunStore(Path(run_dir), readonly=True) as store:
        meta = store.meta()
        rows = [dict(zip(_RESULT_COLUMNS, r)) for r in store.connection.execute(_RESULT_SQL)]
    dsl_of = {r["trial_id"]: r["dsl"] for r in rows}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        row["arm_name"] = row["arm_name"] or _arm_name(row, dsl_of)
        groups[row["model"], row["target"]].append(row)
    targets: dict[str, set[str]] = defaultdict(set)
    for model, target in groups:
        targets[model].add(target)
    generated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    written = []
    for (model, target), model_rows in sorted(groups.items()):
        slug = re.sub(r"[^0-9A-Za-z._-]+", "-", model)
        if target == "cpu" and "gpu" in targets[model]:
            slug += "@cpu"
        payload = _results(model, target, model_rows, meta, generated_at, Path(run_dir))
        path = out_dir / slug / "results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic(path, lambda p, data=payload: Path(p).write_text(json.dumps(data, indent=2)))
        written.append(path)
    return written


def _arm_name(row: dict[str, Any], dsl_of: dict[str, str]) -> str:
    if row["arm"] == "solo":
        return f"solo_{row['dsl']}"
    source = dsl_of.get(row["skill_from"] or "", "unknown")
    return f"{source}2{row['dsl']}_skill"


def _split_problem(problem_id: str) -> tuple[str, str]:
    """('mlp_norm/01_fused_add_rmsnorm') -> ('01_fused_add_rmsnorm', 'mlp_norm'): MKB's problem and category."""
    family, _, name = problem_id.rpartition("/")
    return name, family or "unknown"


def _passed(row: dict[str, Any]) -> bool:
    return row["final_tier"] in ("pass", "pass2x")


def _mkb_record(row: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """MKB's TrialRecord of one trial; None while it has not run (MKB: no record on disk)."""
    if row is None or row["status"] == "planned":
        return None
    if row["status"] in ("error", "infra_error"):
        return {"rewards": {}, "timed_out": False, "error": row["error"] or row["status"], "skipped": None,
                "usage": None}
    usage = {"n_input_tokens": row["prompt_tokens"], "n_cache_tokens": row["cached_tokens"],
             "n_output_tokens": row["completion_tokens"], "cost_usd": row["cost_usd"], "agent_sec": row["wall_s"]}
    if row["status"] == "skipped":
        reason = ("the source wrote no SKILL.md" if row["stop_reason"] == "empty_source_skill"
                  else row["error"] or f"skipped ({row['stop_reason']})")
        return {"rewards": {}, "timed_out": False, "error": None, "skipped": reason, "usage": usage}
    rewards: dict[str, float] = {}
    if row["final_tier"] is not None:
        passed = _passed(row)
        rewards = {"imported": 1.0 if row["f_compiled"] else 0.0, "correct": 1.0 if row["f_correct"] else 0.0,
                   "speedup_vs_eager": float(row["f_speedup"] or 0.0) if passed else 0.0,
                   "passed": 1.0 if passed else 0.0}
    return {"rewards": rewards, "timed_out": row["stop_reason"] == "wall_clock", "error": None, "skipped": None,
            "usage": usage}


def _rec_passed(record: dict[str, Any]) -> bool:
    return record["rewards"].get("passed", 0.0) >= 1.0


def _attains(record: dict[str, Any], threshold: float) -> bool:
    return _rec_passed(record) and record["rewards"].get("speedup_vs_eager", 0.0) >= threshold


def _resolved(rep: dict[str, Any]) -> bool:
    return all(rep[k] is not None and rep[k]["error"] is None for k in ("source", "base", "skill"))


def _skill_outcome(rep: dict[str, Any]) -> dict[str, Any]:
    return rep["skill"] if rep["skill"]["skipped"] is None else rep["base"]


def _mean(values: Iterable[float]) -> Optional[float]:
    numbers = list(values)
    return statistics.mean(numbers) if numbers else None


def _total(values: Iterable[Optional[float]]) -> Optional[float]:
    numbers = list(values)
    return sum(numbers) if numbers and None not in numbers else None  # type: ignore[arg-type]


def _ladder(records: list[dict[str, Any]]) -> dict[str, float]:
    rates = {f"R@{t:g}": statistics.mean(_attains(r, t) for r in records) for t in SPEED_THRESHOLDS}
    return {**rates, "S": 100 * statistics.mean(rates.values())}


def _contrast(resolved: list[dict[str, Any]]) -> dict[str, Any]:
    if not resolved:
        return {"base": None, "skill": None, "lift": None}
    base = _ladder([rep["base"] for rep in resolved])
    skill = _ladder([_skill_outcome(rep) for rep in resolved])
    return {"base": base, "skill": skill, "lift": {name: skill[name] - base[name] for name in base}}


def _usage(records: list[Optional[dict[str, Any]]]) -> dict[str, Any]:
    usages = [r["usage"] for r in records if r is not None and r["usage"] is not None]
    return {"n_trials": len(usages), "cost_usd": _total(u["cost_usd"] for u in usages),
            "n_input_tokens": _total(u["n_input_tokens"] for u in usages),
            "n_cache_tokens": _total(u["n_cache_tokens"] for u in usages),
            "n_output_tokens": _total(u["n_output_tokens"] for u in usages),
            "agent_sec": _mean(u["agent_sec"] for u in usages if u["agent_sec"] is not None)}


def _group_metrics(cells: list[dict[str, Any]]) -> dict[str, Any]:
    replicates = [rep for cell in cells for rep in cell["replicates"]]
    resolved = [rep for rep in replicates if _resolved(rep)]
    by_arm: dict[str, dict[tuple[str, int], Optional[dict[str, Any]]]] = defaultdict(dict)
    for cell in cells:   # each trial once per arm, though a solo is the source of one cell and the base of another
        c = cell["cell"]
        source, target = c["direction"].split("2")
        for rep in cell["replicates"]:
            key = (c["problem"], rep["n_replicate"])
            by_arm[f"solo_{source}"][key] = rep["source"]
            by_arm[f"solo_{target}"][key] = rep["base"]
            by_arm[f"{c['direction']}_skill"][key] = rep["skill"]
    return {"n_cell_replicates": len(replicates), "n_resolved": len(resolved),
            "source_coverage": _mean(_rec_passed(rep["source"]) for rep in resolved),
            "skill_coverage": _mean(rep["skill"]["skipped"] is None for rep in resolved),
            **_contrast(resolved),
            "with_skill": _contrast([rep for rep in resolved if rep["skill"]["skipped"] is None]),
            "by_source_verdict": {"passed": _contrast([rep for rep in resolved if _rec_passed(rep["source"])]),
                                  "failed": _contrast([rep for rep in resolved if not _rec_passed(rep["source"])])},
            "usage": {arm: _usage(list(records.values())) for arm, records in sorted(by_arm.items())}}


def _cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bench: dict[str, dict[tuple[int, str], dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        if row["kind"] == "benchmark":
            bench[row["problem_id"]][row["replicate"], row["arm_name"]] = row
    cells = []
    for problem_id in sorted(bench, key=lambda p: _split_problem(p)):
        arms = bench[problem_id]
        numbers = sorted({r for (r, _), row in arms.items() if row["status"] != "planned"})
        if not numbers:
            continue
        problem, category = _split_problem(problem_id)
        for source, target in (("cutedsl", "tirx"), ("tirx", "cutedsl")):
            direction = f"{source}2{target}"
            replicates = []
            for n in numbers:
                rep = {"n_replicate": n, "source": _mkb_record(arms.get((n, f"solo_{source}"))),
                       "base": _mkb_record(arms.get((n, f"solo_{target}"))),
                       "skill": _mkb_record(arms.get((n, f"{direction}_skill")))}
                replicates.append({"resolved": _resolved(rep), **rep})
            cell = {"problem": problem, "category": category, "direction": direction,
                    "source_task": f"{problem}_{source}", "target_task": f"{problem}_{target}"}
            cells.append({"cell": cell, "replicates": replicates})
    return [{"cell": c["cell"], **_group_metrics([c]), "replicates": c["replicates"]} for c in cells]


def _overall(cells: list[dict[str, Any]]) -> dict[str, Any]:
    directions = sorted({c["cell"]["direction"] for c in cells})
    categories = sorted({c["cell"]["category"] for c in cells})
    return {"n_cells": len(cells), **_group_metrics(cells),
            "by_direction": {d: _group_metrics([c for c in cells if c["cell"]["direction"] == d])
                             for d in directions},
            "by_category": {k: _group_metrics([c for c in cells if c["cell"]["category"] == k])
                            for k in categories}}


def _attempt(row: dict[str, Any]) -> dict[str, Any]:
    problem, family = _split_problem(row["problem_id"])
    tokens = None if row["prompt_tokens"] is None else row["prompt_tokens"] + (row["completion_tokens"] or 0)
    return {"trial_id": row["trial_id"], "problem": row["problem_id"], "family": family, "dsl": row["dsl"],
            "target": row["target"], "kind": row["kind"], "arm": row["arm"], "arm_name": row["arm_name"],
            "replicate": row["replicate"], "chain": row["chain"], "hop": row["hop"],
            "skill_source": row["skill_from"], "status": row["status"], "tier": row["final_tier"],
            "correct": None if row["f_correct"] is None else bool(row["f_correct"]), "speedup": row["f_speedup"],
            "kernel_ms": row["f_kernel_ms"], "eager_ms": row["f_eager_ms"], "submissions": row["n_submissions"],
            "counted_submissions": row["counted_submissions"], "tokens": tokens, "cost_usd": row["cost_usd"],
            "stop_reason": row["stop_reason"], "error": row["error"], "synthetic": bool(row["synthetic"])}


def _summary(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    by_arm: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for a in attempts:
        by_arm[a["arm_name"] if a["kind"] == "benchmark" else f"{a['kind']}:{a['arm']}"].append(a)
    out = {}
    for arm, items in sorted(by_arm.items()):
        scored = [a for a in items if a["status"] == "completed"]
        out[arm] = {"n": len(items), "n_scored": len(scored),
                    "pass_rate": _mean(a["tier"] in ("pass", "pass2x") for a in scored),
                    "pass2x_rate": _mean(a["tier"] == "pass2x" for a in scored)}
    return out


def _results(model: str, target: str, rows: list[dict[str, Any]], meta: dict[str, Any], generated_at: str,
             run_dir: Path) -> dict[str, Any]:
    cells = _cells(rows)
    attempts = [_attempt(r) for r in rows if r["status"] != "planned"]
    synthetic = bool(meta.get("synthetic", False)) or any(a["synthetic"] for a in attempts)
    return {"legend": MKB_LEGEND, "model": model, "harbor_version": None, "overall": _overall(cells),
            "cells": cells, "schema": RESULTS_SCHEMA, "generator": "mkb-ray", "synthetic": synthetic,
            "target": target, "generated_at": generated_at, "source_run": str(run_dir.resolve()),
            "config_hash": meta.get("config_hash"), "attempts": attempts, "summary": _summary(attempts)}
