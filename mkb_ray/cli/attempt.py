"""`mkb attempt`: one attempt on a local Ray (127.0.0.1 only), starting the model server when the model is ours.

`attempt_main(...)` is the same thing with plain arguments (the end-to-end tests call it). Exit codes: 0 when an
attempt record was written with status completed or skipped (a failing kernel is still a completed attempt), 1 when
the attempt ended in an infrastructure error, 2 on bad usage (unknown model or problem, a budget field that does not
exist, a CPU target for CuTe DSL).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path
from typing import Any, Optional, Sequence

log = logging.getLogger(__name__)

HELP = "run one agent attempt (solo, or conditioned on a SKILL.md) and write its record"
DESCRIPTION = ("A model reads the problem, writes kernels, gets verdicts back, keeps a SKILL.md and ends with a "
               "final kernel judged once more. Exit 0 when the record says completed or skipped.")

# Model server start-up on a 2-core CPU machine took ~50-80 s (measured 2026-11-29); the first start also
# converts SmolLM2 (~50 s). Generous, but bounded.
SERVER_START_TIMEOUT_S = 1800.0


class AttemptUsageError(ValueError):
    """Bad usage: exit code 2 with this message."""


def parse_budget_overrides(items: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` strings (e.g. wall_clock_s=600, submissions=3) checked against BudgetSpec: a typo names the
    field."""
    from pydantic import ValidationError

    from ..records import BudgetSpec

    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AttemptUsageError(f"--budget takes KEY=VALUE, got {item!r}")
        key = key.strip()
        if key not in BudgetSpec.model_fields or key == "schema_version":
            fields = ", ".join(f for f in BudgetSpec.model_fields if f != "schema_version")
            raise AttemptUsageError(f"unknown budget field {key!r} (fields: {fields})")
        value = value.strip()
        overrides[key] = None if value.lower() in ("none", "null", "") else value
    try:
        BudgetSpec(**overrides)
    except ValidationError as err:
        raise AttemptUsageError("; ".join(f"budget {e['loc'][0]}: {e['msg']}" for e in err.errors())) from None
    return overrides


def _init_ray() -> bool:
    """A local Ray bound to loopback; returns whether this call started it."""
    from ..models.local_ray import init_local_ray

    # Logical CPUs: the model replica reserves the machine's cores, yet model turns and judging alternate within
    # an attempt, so the evaluator gets its own logical slot instead of waiting for the replica to go away.
    return init_local_ray(num_cpus=max(4, (os.cpu_count() or 2) + 1))


def attempt_main(problem: str, dsl: str, model: str, out: Path, agent: str = "auto", skill: Optional[Path] = None,
                 budget_overrides: Optional[dict[str, Any]] = None, target: Optional[str] = None,
                 device: Optional[str] = None, roster_dir: Optional[Path] = None, api_base: Optional[str] = None,
                 seed: Optional[int] = None, attempt_id: Optional[str] = None,
                 problems_root: Optional[Path] = None) -> int:
    """Run one attempt and write its directory `out`.

    agent: workspace | chat | auto (workspace when the roster says the model calls tools, else chat).
    target: gpu | cpu (cpu: the TIRx CPU variant); default cpu for TIRx without a GPU, else gpu.
    device: where kernels are judged (cuda | cpu); default cuda when this machine has a GPU. GPU-target kernels
    judged on a CPU are compiled only (tier compile_only).
    api_base: an already running OpenAI-compatible server for a local model (e.g. `mkb serve`); without it a
    ModelServer is started on the local Ray and stopped afterwards.
    """
    from pydantic import ValidationError

    from ..judge.device import detect_gpu
    from ..models.roster import RosterError, get_model
    from ..problems import load_problems
    from ..records import AttemptConfig, BudgetSpec

    gpu = detect_gpu()
    try:
        spec = get_model(model, roster_dir)
        load_problems(problems_root).get(problem)
        target = target or ("cpu" if dsl == "tirx" and not gpu else "gpu")
        device = device or ("cuda" if gpu else "cpu")
        if agent == "auto":
            agent = "workspace" if spec.supports_tools else "chat"
        config = AttemptConfig(problem_id=problem, dsl=dsl, target=target, model=model, agent=agent,
                               arm="skill" if skill else "solo", skill_path=skill,
                               budget=BudgetSpec(**(budget_overrides or {})), seed=seed, out_dir=Path(out),
                               attempt_id=attempt_id)
    except (KeyError, RosterError, FileNotFoundError) as err:
        raise AttemptUsageError(str(err).strip("'\"")) from None
    except ValidationError as err:
        raise AttemptUsageError("; ".join(e["msg"] for e in err.errors())) from None
    if skill is not None and not Path(skill).is_file():
        raise AttemptUsageError(f"no source SKILL.md at {skill}")
    if agent == "workspace" and not spec.supports_tools:
        log.warning("model %s is not marked as calling tools reliably; the workspace agent may get no tool calls",
                    model)
    return asyncio.run(_run(config, spec, device, api_base, problems_root))


async def _run(config: Any, spec: Any, device: str, api_base: Optional[str], problems_root: Optional[Path]) -> int:
    import ray

    from ..actors.evaluator import make_evaluator
    from ..agents.run_attempt import run_attempt
    from ..llm.client import LLMClient

    started_ray = _init_ray()
    server = None
    try:
        if spec.is_local and api_base is None:
            from ..actors.model_server import make_model_server

            server = make_model_server(spec)
            try:
                info = await asyncio.wait_for(server.start.remote(), SERVER_START_TIMEOUT_S)
            except Exception as err:  # noqa: BLE001 - no server, no attempt: say why and exit 1
                log.error("the model server for %s did not start: %s", spec.name, err)
                return 1
            api_base = info["api_base"]
            log.info("model %s serving at %s", spec.name, api_base)
        evaluator = make_evaluator(device, slots=1,
                                   problems_root=str(problems_root) if problems_root else None)
        client = LLMClient(spec, api_base if spec.is_local else None, session_id=config.attempt_id)
        record = await run_attempt(config, client, evaluator, problems_root=problems_root)
    finally:
        if server is not None:
            report = await server.stop.remote()
            log.info("model server stopped: %s", report)
        if started_ray:
            ray.shutdown()
    _print_summary(record)
    return 1 if record.status == "error" else 0


def _print_summary(record: Any) -> None:
    from rich.console import Console

    from ._console import make_console

    console = make_console()
    final = record.final_verdict
    counted = sum(1 for s in record.submissions if s.counted)
    console.print(
        f"[bold]{record.config.problem_id}[/bold] ({record.config.dsl}, {record.config.target}) with "
        f"{record.model} [{record.config.agent}, {record.config.arm}]: status {record.status}, stopped by "
        f"{record.stop_reason}; {counted} judged submission(s) of {len(record.submissions)}; final tier "
        f"{final.tier if final else '-'}{f' ({final.reason})' if final else ''}; SKILL.md "
        f"{record.skill_md_bytes} bytes; {record.wall_s:.0f} s → {record.config.out_dir}")
    if record.error:
        Console(stderr=True).print(f"[red]error:[/red] {record.error.splitlines()[0]}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `mkb attempt PROBLEM --dsl D --model M ...`."""
    parser.add_argument("problem", help="problem id, e.g. mlp_norm/01_fused_add_rmsnorm")
    parser.add_argument("--dsl", required=True, choices=("tirx", "cutedsl"))
    parser.add_argument("--model", required=True, help="roster name (experiments/models/<name>.yaml)")
    parser.add_argument("--agent", default="auto", choices=("auto", "workspace", "chat"))
    parser.add_argument("--skill", type=Path, default=None, help="source SKILL.md: makes this a skill attempt")
    parser.add_argument("--budget", action="append", default=[], metavar="KEY=VALUE",
                        help="budget override, repeatable: wall_clock_s, submissions, kernel_bytes, tokens, "
                             "count_queue_wait, max_turns, reply_max_tokens")
    parser.add_argument("--target", choices=("gpu", "cpu"), default=None,
                        help="cpu: the TIRx CPU (llvm) variant; default cpu for TIRx on a machine without a GPU")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="where kernels are judged")
    parser.add_argument("--out", type=Path, required=True, help="the attempt's output directory")
    parser.add_argument("--roster-dir", type=Path, default=None)
    parser.add_argument("--problems-root", type=Path, default=None)
    parser.add_argument("--api-base", default=None, help="use this running server instead of starting one")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--attempt-id", default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run `mkb attempt` from parsed arguments; usage errors print one line and return 2."""
    import sys

    try:
        return attempt_main(args.problem, args.dsl, args.model, args.out, agent=args.agent, skill=args.skill,
                            budget_overrides=parse_budget_overrides(args.budget), target=args.target,
                            device=args.device, roster_dir=args.roster_dir, api_base=args.api_base, seed=args.seed,
                            attempt_id=args.attempt_id, problems_root=args.problems_root)
    except AttemptUsageError as err:
        print(f"mkb attempt: {err}", file=sys.stderr)
        return 2
