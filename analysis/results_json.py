"""MetaKernelBench-compatible per-model `results.json`, with its metrics from `analysis/ladder.py`.

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
`n_replicate` is 1-based, as in MKB (our trial ids count replicates from 0).
"""
from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Optional

from ..store import RunStore
from ..store.export import atomic_write
from .cells import PASSING, CellReplicate, cell_replicates, family_of, result_rows
from .ladder import group_summary

RESULTS_SCHEMA = "mkb-ray/results-json/1"

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


def export_results_json(run_dir: Path, out_dir: Path) -> list[Path]:
    """Write `<out_dir>/<model>/results.json` for every model of the run (see the module docstring)."""
    out_dir = Path(out_dir)
    with RunStore(Path(run_dir), readonly=True) as store:
        meta = store.meta()
        rows = result_rows(store)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
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
        every_target = [r for r in rows if r["model"] == model]  # a cell's source may sit on the other target
        payload = _results(model, target, model_rows, every_target, meta, generated_at, Path(run_dir))
        path = out_dir / slug / "results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp, text=json.dumps(payload, indent=2): Path(tmp).write_text(text))
        written.append(path)
    return written


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
        passed = row["final_tier"] in PASSING
        rewards = {"imported": 1.0 if row["f_compiled"] else 0.0, "correct": 1.0 if row["f_correct"] else 0.0,
                   "speedup_vs_eager": float(row["f_speedup"] or 0.0) if passed else 0.0,
                   "passed": 1.0 if passed else 0.0}
    return {"rewards": rewards, "timed_out": row["stop_reason"] == "wall_clock", "error": None, "skipped": None,
            "usage": usage}


def _mean(values: Iterable[float]) -> Optional[float]:
    numbers = list(values)
    return statistics.mean(numbers) if numbers else None


def _total(values: Iterable[Optional[float]]) -> Optional[float]:
    numbers = list(values)
    return sum(numbers) if numbers and None not in numbers else None  # type: ignore[arg-type]


def _usage(records: list[Optional[dict[str, Any]]]) -> dict[str, Any]:
    usages = [r["usage"] for r in records if r is not None and r["usage"] is not None]
    return {"n_trials": len(usages), "cost_usd": _total(u["cost_usd"] for u in usages),
            "n_input_tokens": _total(u["n_input_tokens"] for u in usages),
            "n_cache_tokens": _total(u["n_cache_tokens"] for u in usages),
            "n_output_tokens": _total(u["n_output_tokens"] for u in usages),
            "agent_sec": _mean(u["agent_sec"] for u in usages if u["agent_sec"] is not None)}


def _attempt(row: dict[str, Any]) -> dict[str, Any]:
    family = family_of(row["problem_id"])
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
        # Benchmark and intervention arms by name (each intervention twin is its own arm); chain trials by kind.
        by_arm[a["arm_name"] if a["kind"] in ("benchmark", "intervention") else f"{a['kind']}:{a['arm']}"].append(a)
    out = {}
    for arm, items in sorted(by_arm.items()):
        scored = [a for a in items if a["status"] == "completed"]
        out[arm] = {"n": len(items), "n_scored": len(scored),
                    "pass_rate": _mean(a["tier"] in ("pass", "pass2x") for a in scored),
                    "pass2x_rate": _mean(a["tier"] == "pass2x" for a in scored)}
    return out


def _cells(rows: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    """MKB's cells of one target: per (problem, direction), the metrics and every replicate's three TrialRecords.
    `rows`: the model's trials on every target (analysis.cells.cell_replicates pairs them)."""
    by_id = {r["trial_id"]: r for r in rows}
    grouped: dict[tuple[str, str], list[CellReplicate]] = defaultdict(list)
    for cr in cell_replicates(rows):
        if cr.target == target:
            grouped[cr.problem_id, cr.direction].append(cr)
    cells = []
    for (problem_id, direction), replicates in sorted(grouped.items(), key=lambda kv: (_split(kv[0][0]), kv[0][1])):
        problem, family = _split(problem_id)
        source, target = direction.split("2")
        cell = {"problem": problem, "category": family, "direction": direction,
                "source_task": f"{problem}_{source}", "target_task": f"{problem}_{target}"}
        reps = [{"resolved": cr.resolved, "n_replicate": cr.replicate + 1,
                 **{arm: _mkb_record(by_id.get(a.trial_id) if a else None)
                    for arm, a in (("source", cr.source), ("base", cr.base), ("skill", cr.skill))}}
                for cr in replicates]
        cells.append({"cell": cell, **_metrics(replicates, reps), "replicates": reps, "_crs": replicates})
    return cells


def _split(problem_id: str) -> tuple[str, str]:
    """('mlp_norm/01_fused_add_rmsnorm') -> ('01_fused_add_rmsnorm', 'mlp_norm'): MKB's problem and category."""
    return problem_id.rpartition("/")[2], family_of(problem_id)


def _metrics(replicates: list[CellReplicate], records: list[dict[str, Any]]) -> dict[str, Any]:
    """MKB's group metrics (analysis/ladder.py) plus usage per arm, each trial counted once per arm (a solo is the
    source of one cell and the base of another)."""
    by_arm: dict[str, dict[tuple[str, int], Optional[dict[str, Any]]]] = defaultdict(dict)
    for cr, rep in zip(replicates, records):
        key = (cr.problem_id, cr.replicate)
        by_arm[f"solo_{cr.source_dsl}"][key] = rep["source"]
        by_arm[f"solo_{cr.target_dsl}"][key] = rep["base"]
        by_arm[f"{cr.direction}_skill"][key] = rep["skill"]
    return {**group_summary(replicates),
            "usage": {arm: _usage(list(recs.values())) for arm, recs in sorted(by_arm.items())}}


def _overall(cells: list[dict[str, Any]]) -> dict[str, Any]:
    def metrics(chosen: list[dict[str, Any]]) -> dict[str, Any]:
        return _metrics([cr for c in chosen for cr in c["_crs"]], [r for c in chosen for r in c["replicates"]])

    directions = sorted({c["cell"]["direction"] for c in cells})
    categories = sorted({c["cell"]["category"] for c in cells})
    return {"n_cells": len(cells), **metrics(cells),
            "by_direction": {d: metrics([c for c in cells if c["cell"]["direction"] == d]) for d in directions},
            "by_category": {k: metrics([c for c in cells if c["cell"]["category"] == k]) for k in categories}}


def provider_id(model: str) -> str:
    """MKB's `model`: the provider's id of a roster model (its litellm id, else its open-weights repo), else the
    roster name (a model the roster does not know, e.g. a synthetic one)."""
    from ..models.roster import get_model

    try:
        spec = get_model(model)
    except (KeyError, ValueError):
        return model
    return spec.api_litellm_id or spec.hf_repo or model


def _results(model: str, target: str, rows: list[dict[str, Any]], every_target: list[dict[str, Any]],
             meta: dict[str, Any], generated_at: str, run_dir: Path) -> dict[str, Any]:
    cells = _cells(every_target, target)
    overall = _overall(cells)
    for cell in cells:
        del cell["_crs"]
    attempts = [_attempt(r) for r in rows if r["status"] != "planned"]
    synthetic = bool(meta.get("synthetic", False)) or any(a["synthetic"] for a in attempts)
    return {"legend": MKB_LEGEND, "model": provider_id(model), "roster_model": model, "harbor_version": None,
            "overall": overall,
            "cells": cells, "schema": RESULTS_SCHEMA, "generator": "mkb-ray", "synthetic": synthetic,
            "target": target, "generated_at": generated_at, "source_run": str(run_dir.resolve()),
            "config_hash": meta.get("config_hash"), "attempts": attempts, "summary": _summary(attempts)}
