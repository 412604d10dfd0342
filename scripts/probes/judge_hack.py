"""Judge one adversarial kernel (tests/adversarial/) at the production protocol and print what decided its verdict:
tier, check, DSL share, the device record's split (dsl / unnamed / torch / glue µs, kernel names) and the compiles
the launch monitor saw. For a hack that passed where it should not, this says which count let it through.

    python3 scripts/probes/judge_hack.py tests/adversarial/cute_v3_foreign_kernel_jiterator.py [--runs N]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from test_adversarial import parse_header  # noqa: E402

from mkb_ray.judge import JudgeOptions, judge_kernel  # noqa: E402
from mkb_ray.problems import load_problems  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hack", type=Path)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    hack = parse_header(args.hack)
    problem = load_problems().get(hack.problem)
    for _ in range(args.runs):
        verdict = judge_kernel(problem, args.hack, hack.dsl, hack.device,
                               options=JudgeOptions(skip_static_checks=hack.skip_static,
                                                    draws_per_trip=hack.draws_per_trip))
        print(f"{args.hack.stem}: {verdict.tier}/{verdict.rejected_by} (expected {'|'.join(hack.expect)}): "
              f"{verdict.reason[:300]}")
        print(f"  dsl_share={verdict.dsl_share} work_evidence={verdict.work_evidence}")
        print(f"  compiles={[(c.dsl, c.kernels) for c in verdict.compiles]}")
        for check in (c for c in verdict.checks if c.name == "decoration"):
            print(f"  check {check.name}: passed={check.passed} {check.detail[:400]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
