"""How far do the calibration preset's planted rates move with the 'faster' margin the analysis applies?

The preset (`experiments/synthetic/paper-2610.05014.yaml`) was fitted with help and harm judged at SYNTHETIC_MARGIN
(0.92, the GPU judge's pair-p95 on 2026-12-01); the GPU judge's measured margin is now ~0.035
(`analysis/noise_margins.json`). Issue 27 item 4 asks for the margin to come from measured noise, which means a
refit: this prints, from the closed forms of `mkb_ray/synthetic/planted.py` alone (no run, no draws), the rates the
preset plants at each margin — T and H, and relative standing as the paper draws it (the source against the pair's
own base) — so the size of that refit is known before it starts. Nothing is asserted; a few seconds.

    python3 benchmarks/synthetic_margin_sensitivity.py
    python3 benchmarks/synthetic_margin_sensitivity.py --margins 0.92 0.05 0.035
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mkb_ray.campaign.config import load_experiment  # noqa: E402
from mkb_ray.synthetic.planted import SYNTHETIC_MARGIN, planted_rates  # noqa: E402

PRESET = REPO / "experiments" / "synthetic" / "paper-2610.05014.yaml"
# The paper's headline standing rates the preset was fitted to (its header): help | above, harm | below.
PAPER = {"help | above": 0.712, "harm | above": 0.081, "help | below": 0.106, "harm | below": 0.538}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--margins", nargs="*", type=float,
                        default=[SYNTHETIC_MARGIN, 0.5, 0.2, 0.12, 0.05, 0.035, 0.0],
                        help="margins to plant at (default: the preset's, down to 0)")
    parser.add_argument("--preset", type=Path, default=PRESET, help="a synthetic experiment YAML (default: the "
                        "calibration preset)")
    args = parser.parse_args(argv)
    config = load_experiment(args.preset)
    if config.synthetic is None:
        parser.error(f"{args.preset}: no 'synthetic:' section, so nothing is planted")
    spec, models = config.synthetic, list(config.models)
    print(f"# planted rates of {args.preset.name} ({len(models)} models, both directions pooled) by margin")
    print("| margin | T | H | help / above | harm / above | help / below | harm / below | closure enrichment |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| paper | - | - | {PAPER['help | above']:.3f} | {PAPER['harm | above']:.3f} | "
          f"{PAPER['help | below']:.3f} | {PAPER['harm | below']:.3f} | - |")
    for margin in args.margins:
        rates = planted_rates(spec, models, margin)
        t, h = rates.help_harm()
        _, help_above, harm_above = rates.standing("above", draw="paper")
        _, help_below, harm_below = rates.standing("below", draw="paper")
        print(f"| {margin:.3f} | {t:.3f} | {h:.3f} | {help_above:.3f} | {harm_above:.3f} | {help_below:.3f} | "
              f"{harm_below:.3f} | {rates.enrichment()[2]:+.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
