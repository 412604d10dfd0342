"""The `mkb` command line: this module only registers the subcommands; each lives in its own module.

    problems.py  mkb problems list | validate      eval.py    mkb eval
    serve.py     mkb serve                          attempt.py mkb attempt
    plan.py      mkb plan                           run.py     mkb run
    export.py    mkb export                         lineage.py mkb lineage
    report.py    mkb report (static HTML report)       attribute.py mkb attribute (LLM judge of harm causes)
    gold.py      mkb gold (the claim pipeline scored on the gold sets)   _common.py options several commands share

A subcommand module has `HELP` (and optionally `DESCRIPTION`), `add_arguments(parser)`, which sets the handler,
and imports nothing heavy at module level: torch, the DSLs, Ray, litellm and polars are imported inside the
handlers, so `mkb --help` and the parser stay fast, and judging happens in subprocesses.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Optional, Sequence

from ._common import UsageError

# In the order `mkb --help` lists them.
SUBCOMMANDS = ("problems", "eval", "serve", "attempt", "plan", "run", "export", "lineage", "attribute", "report",
               "gold")

EXAMPLES = """examples:
  mkb problems list                                   # the shipped suite, with solutions per DSL
  mkb problems validate --device cpu                  # judge every shipped solution on this machine
  mkb eval mlp_norm/01_fused_add_rmsnorm my_kernel.py --dsl tirx --device cpu
  mkb eval attention/01_gqa_paged_decode k.py --dsl cutedsl --device cuda --json
  mkb serve smollm2                                   # the embedded default model on 127.0.0.1:8000
  mkb attempt mlp_norm/01_fused_add_rmsnorm --dsl tirx --model smollm2 --out runs/a1
  mkb attempt mlp_norm/01_fused_add_rmsnorm --dsl cutedsl --model glm-5.3 --skill runs/a1/SKILL.md --out runs/a2
  mkb plan experiments/chain-100.yaml                 # trial counts, dependencies, GPU-hour estimate
  mkb run experiments/quickstart.yaml                 # the embedded default campaign; rerun to resume
  mkb export runs/quickstart --parquet --results-json
  mkb lineage runs/quickstart                         # claims, their lineage along chains, headline table, plots
  mkb attribute runs/quickstart --model smollm2 --api-base http://127.0.0.1:8000/v1   # why skills harmed (LLM judge)
  mkb report runs/quickstart --out runs/quickstart/report   # static HTML: tables, plots, drill-down to transcripts
  mkb gold                                            # segmentation, annotators, matcher vs hand-labelled gold

devices: 'cuda' judges a GPU kernel on the GPU (compiled to PTX only, tier compile_only, where there is none);
'cpu' judges on this machine's CPU: CPU-target TIRx kernels (target="llvm") run for real, GPU kernels are
compiled to PTX only. Shapes: production on cuda, the problem's smoke preset on cpu (--preset overrides).
"""

# Set for this process and the ones it starts (Ray workers, model servers): litellm reads it once, at import, and
# otherwise tries to download its price map — this machine kind has no network beyond package registries.
PROCESS_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mkb", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
        description="mkb-ray: judge GPU kernels written in CuTe DSL or TIRx against MetaKernelBench-style problems, "
                    "run agents on them, and measure whether their SKILL.md helps the next attempt.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        sub = commands.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", None))
        module.add_arguments(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    for key, value in PROCESS_ENV.items():
        os.environ.setdefault(key, value)
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as err:
        print(f"mkb: error: {err}", file=sys.stderr)
        return 2
