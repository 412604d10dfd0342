"""How far do the calibration preset's planted rates move with the 'faster' margin the analysis applies?

The preset (`experiments/synthetic/paper-2610.05014.yaml`) was fitted with help and harm judged at SYNTHETIC_MARGIN
(0.92, the GPU judge's pair-p95 on 2026-12-01); the GPU judge's measured margin is now ~0.035
(`analysis/noise_margins.json`). Issue 27 item 4 asks for the margin to come from measured noise, which means a
refit: this prints, from the closed forms of `mkb_ray/synthetic/planted.py` alone (no run, no draws), the rates the
preset plants at each margin — T and H, and relative standing as the paper draws it (the source against the pair's
own base) — so the size of that refit is known before it starts. With `--fit S`, a random local search (S seconds
per margin, seed 0) over five knobs of the preset (pass_speedup_min, pass2x_speedup_sigma, skill_help_shift,
source_pass_shift, closure_harm_per_claim; tiers kept) for rates back at the paper's standing, T = H = 0.32 and a
pooled closure enrichment of 0.10 — whether the generator as it is can be refitted at a margin, and to what laws.
Nothing is asserted; a few seconds (plus S per margin).

    python3 benchmarks/synthetic_margin_sensitivity.py
    python3 benchmarks/synthetic_margin_sensitivity.py --margins 0.05 0.035 --fit 120
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mkb_ray.campaign.config import ExperimentConfigError, load_experiment  # noqa: E402
from mkb_ray.synthetic.planted import SYNTHETIC_MARGIN, planted_rates  # noqa: E402
from mkb_ray.synthetic.spec import SyntheticSpec  # noqa: E402

PRESET = REPO / "experiments" / "synthetic" / "paper-2610.05014.yaml"
# The paper's headline standing rates the preset was fitted to (its header): help | above, harm | below.
PAPER = {"help | above": 0.712, "harm | above": 0.081, "help | below": 0.106, "harm | below": 0.538}
# What --fit also aims at (the preset's own assumptions, its header): T and H per pooled model, closure enrichment.
ASSUMED = {"T": 0.32, "H": 0.32, "closure enrichment": 0.10}
# The knobs --fit moves, with the bounds it keeps them in.
KNOBS = {"pass_speedup_min": (0.3, 1.99), "pass2x_speedup_sigma": (0.0, 1.5), "skill_help_shift": (-1.5, 0.5),
         "source_pass_shift": (0.0, 1.5), "closure_harm_per_claim": (0.0, 0.8)}


def _rates(spec: SyntheticSpec, models: list[str], margin: float) -> dict[str, float]:
    rates = planted_rates(spec, models, margin)
    t, h = rates.help_harm()
    _, help_above, harm_above = rates.standing("above", draw="paper")
    _, help_below, harm_below = rates.standing("below", draw="paper")
    return {"T": t, "H": h, "help | above": help_above, "harm | above": harm_above, "help | below": help_below,
            "harm | below": harm_below, "closure enrichment": rates.enrichment()[2]}


def _loss(rates: dict[str, float]) -> float:
    standing = sum((rates[key] - value) ** 2 for key, value in PAPER.items())
    return standing + 0.5 * sum((rates[key] - value) ** 2 for key, value in ASSUMED.items())


def _fit(spec: SyntheticSpec, models: list[str], margin: float, seconds: float) -> tuple[float, dict[str, float]]:
    """A random local search from the preset's own knobs, shrinking its steps; (loss, knobs) of the best point."""
    rng = random.Random(0)
    best_knobs = {name: float(getattr(spec, name)) for name in KNOBS}
    best = _loss(_rates(spec, models, margin))
    step, started = 0.3, time.monotonic()
    while time.monotonic() - started < seconds:
        trial = {name: min(high, max(low, best_knobs[name] + rng.gauss(0.0, step * (high - low))))
                 for name, (low, high) in KNOBS.items()}
        loss = _loss(_rates(spec.model_copy(update=trial), models, margin))
        if loss < best:
            best, best_knobs = loss, trial
        step = max(0.02, step * 0.995)
    return best, best_knobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--margins", nargs="*", type=float,
                        default=[SYNTHETIC_MARGIN, 0.5, 0.2, 0.12, 0.05, 0.035, 0.0],
                        help="margins to plant at (default: the preset's, down to 0)")
    parser.add_argument("--fit", type=float, default=0.0, metavar="S",
                        help="also refit five knobs at each margin, S seconds each (default: no fit)")
    parser.add_argument("--preset", type=Path, default=PRESET, help="a synthetic experiment YAML (default: the "
                        "calibration preset)")
    args = parser.parse_args(argv)
    try:
        config = load_experiment(args.preset)
    except ExperimentConfigError as err:
        parser.error(str(err))
    if config.synthetic is None:
        parser.error(f"{args.preset}: no 'synthetic:' section, so nothing is planted")
    spec, models = config.synthetic, list(config.models)
    try:
        _rates(spec, models, args.margins[0] if args.margins else SYNTHETIC_MARGIN)
    except ValueError as err:  # e.g. judge: real, or per-problem effects: no closed form
        parser.error(f"{args.preset}: synthetic: {err}")
    print(f"# planted rates of {args.preset.name} ({len(models)} models, both directions pooled) by margin")
    print("| margin | T | H | help / above | harm / above | help / below | harm / below | closure enrichment |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| paper | - | - | {PAPER['help | above']:.3f} | {PAPER['harm | above']:.3f} | "
          f"{PAPER['help | below']:.3f} | {PAPER['harm | below']:.3f} | - |")
    for margin in args.margins:
        rates = _rates(spec, models, margin)
        print(f"| {margin:.3f} | {rates['T']:.3f} | {rates['H']:.3f} | {rates['help | above']:.3f} | "
              f"{rates['harm | above']:.3f} | {rates['help | below']:.3f} | {rates['harm | below']:.3f} | "
              f"{rates['closure enrichment']:+.3f} |")
    if args.fit > 0:
        print(f"\n# refitted ({args.fit:g} s per margin): the knobs, then the rates they plant")
        for margin in args.margins:
            loss, knobs = _fit(spec, models, margin, args.fit)
            rates = _rates(spec.model_copy(update=knobs), models, margin)
            shown = ", ".join(f"{name} {value:.3f}" for name, value in knobs.items())
            planted = ", ".join(f"{name} {value:.3f}" for name, value in rates.items())
            print(f"- margin {margin:.3f}: loss {loss:.1e}; {shown}\n  planted: {planted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
