"""What the calibration preset plants at a 'faster' margin, by the synthetic judge's speed law, and its refit.

The analysis compares synthetic attempts at the GPU judge's measured margin (analysis/noise_margins.json, ~0.035;
`PairingRules.margin`), and the synthetic judge reads kernel times with noise of that pair-p95 around a speed each
problem has per tier, spread between attempts by `attempt_speed_sigma` (mkb_ray/synthetic/speed.py). This prints,
from planted.py alone (no run, no draws): the preset's planted rates by margin, and at the measured margin by
attempt spread — T and H, relative standing as the paper draws it (the source against the pair's own base) and the
closure enrichment. `--refit S` searches (random local search, S seconds, seed 0) for the attempt spread and, for
every model at once, a shift of skill_help_shift and scales of source_pass_shift and closure_harm_per_claim that
bring the rates back to the paper's standing, T = H = 0.32 and an enrichment of 0.10 at the measured margin, and
prints the knobs to write into the preset; `--fix-spread X` holds the spread at X to show what a wider spread
costs. Nothing is asserted; a few seconds (plus S).

    python3 benchmarks/synthetic_margin_sensitivity.py
    python3 benchmarks/synthetic_margin_sensitivity.py --refit 150 [--fix-spread 0.05]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analysis.noise_margins import load_noise_margins  # noqa: E402
from mkb_ray.campaign.config import ExperimentConfigError, load_experiment  # noqa: E402
from mkb_ray.synthetic.planted import planted_rates  # noqa: E402
from mkb_ray.synthetic.spec import PerModel, SyntheticSpec  # noqa: E402

PRESET = REPO / "experiments" / "synthetic" / "paper-2610.05014.yaml"
# The paper's headline standing rates the preset is fitted to (its header): help | above, harm | below.
PAPER = {"help | above": 0.712, "harm | above": 0.081, "help | below": 0.106, "harm | below": 0.538}
# What the refit also aims at (the preset's own assumptions, its header): T and H pooled, and each model's closure
# enrichment (five models 7-17 points, the sixth none).
ASSUMED = {"T": 0.32, "H": 0.32}
ENRICHMENT = {"glm-5.3-flash": 0.07, "glm-5.3": 0.10, "qwen3.8-flash": 0.12, "gpt-5.6-sol": 0.15,
              "deepseek-v4-pro": 0.17, "gemini-3.7-flash": 0.0}
# The refit's moves, with their bounds: the attempt spread, a shift added to every model's skill_help_shift, a
# factor on every model's source_pass_shift (so the models keep their order), and a factor on each model's
# closure_harm_per_claim (its enrichment is its own).
MOVES = {"attempt_speed_sigma": (0.0, 0.3), "help shift +": (-0.5, 0.5), "source-pass shift ×": (0.3, 2.0)}
CLOSURE_MOVE = (0.3, 2.0)
IDENTITY = {"help shift +": 0.0, "source-pass shift ×": 1.0}


def _clamp(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


def moved(spec: SyntheticSpec, moves: dict[str, float]) -> SyntheticSpec:
    """`spec` with the refit's moves applied to the spec's knobs and to every `per_model` entry's (a model's
    closure factor is `moves["closure harm × <model>"]`, 1 when absent)."""
    def knobs(model: str | None) -> dict[str, float]:
        effect = spec.effect(model)
        closure = moves.get(f"closure harm × {model}", 1.0)
        return {"skill_help_shift": _clamp(effect.skill_help_shift + moves["help shift +"], -1.0, 1.0),
                "source_pass_shift": _clamp(effect.source_pass_shift * moves["source-pass shift ×"], -1.0, 1.0),
                "closure_harm_per_claim": _clamp(effect.closure_harm_per_claim * closure, 0.0, 1.0)}
    per_model = {m: own.model_copy(update=knobs(m)) for m, own in spec.per_model.root.items()}
    return spec.model_copy(update={"attempt_speed_sigma": moves["attempt_speed_sigma"],
                                   "per_model": PerModel(per_model), **knobs(None)})


def rates_at(spec: SyntheticSpec, models: list[str], margin: float) -> dict[str, float]:
    rates = planted_rates(spec, models, margin)
    t, h = rates.help_harm()
    _, help_above, harm_above = rates.standing("above", draw="paper")
    _, help_below, harm_below = rates.standing("below", draw="paper")
    out = {"T": t, "H": h, "help | above": help_above, "harm | above": harm_above, "help | below": help_below,
           "harm | below": harm_below, "closure enrichment": rates.enrichment()[2],
           "reverse harm | help": rates.reverse()["harm"]}
    return out | {f"enrichment {m}": rates.enrichment(m)[2] for m in models}


def _loss(rates: dict[str, float]) -> float:
    targets = PAPER | ASSUMED | {f"enrichment {m}": e for m, e in ENRICHMENT.items() if f"enrichment {m}" in rates}
    if not any(key.startswith("enrichment ") for key in targets):   # a preset of other models: pooled enrichment
        targets["closure enrichment"] = 0.10
    return sum((rates[key] - value) ** 2 for key, value in targets.items())


def refit(spec: SyntheticSpec, models: list[str], margin: float, seconds: float, fixed_spread: float | None
          ) -> tuple[float, dict[str, float]]:
    """A random local search from the preset (identity moves), shrinking its steps; (loss, moves) of the best."""
    rng = random.Random(0)
    bounds = MOVES | {f"closure harm × {m}": CLOSURE_MOVE for m in models if spec.effect(m).closure_harm_per_claim}
    best_moves = {"attempt_speed_sigma": spec.attempt_speed_sigma if fixed_spread is None else fixed_spread,
                  **IDENTITY, **{name: 1.0 for name in bounds if name.startswith("closure")}}
    best = _loss(rates_at(moved(spec, best_moves), models, margin))
    step, started = 0.2, time.monotonic()
    while time.monotonic() - started < seconds:
        trial = {name: _clamp(best_moves[name] + rng.gauss(0.0, step * (high - low)), low, high)
                 for name, (low, high) in bounds.items()}
        if fixed_spread is not None:
            trial["attempt_speed_sigma"] = fixed_spread
        loss = _loss(rates_at(moved(spec, trial), models, margin))
        if loss < best:
            best, best_moves = loss, trial
        step = max(0.01, step * 0.995)
    return best, best_moves


def _row(label: str, rates: dict[str, float]) -> str:
    return (f"| {label} | {rates['T']:.3f} | {rates['H']:.3f} | {rates['help | above']:.3f} | "
            f"{rates['harm | above']:.3f} | {rates['help | below']:.3f} | {rates['harm | below']:.3f} | "
            f"{rates['closure enrichment']:+.3f} | {rates['reverse harm | help']:.3f} |")


HEADER = ("| {} | T | H | help / above | harm / above | help / below | harm / below | closure enrichment | "
          "reverse harm / help |\n|---|---|---|---|---|---|---|---|---|\n| paper | - | - | 0.712 | 0.081 | 0.106 | "
          "0.538 | - | 0.415 |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    measured = load_noise_margins().margin("gpu")
    parser.add_argument("--margins", nargs="*", type=float, default=[measured, 0.05, 0.2, 0.92],
                        help=f"margins to plant at (default: the measured {measured}, then wider ones)")
    parser.add_argument("--spreads", nargs="*", type=float, default=[0.0, 0.012, 0.025, 0.05, 0.1, 0.3],
                        help="attempt_speed_sigma values to plant at, at the measured margin")
    parser.add_argument("--refit", type=float, default=0.0, metavar="S",
                        help="refit the preset at the measured margin for S seconds (default: no refit)")
    parser.add_argument("--fix-spread", type=float, default=None, metavar="X",
                        help="with --refit: hold attempt_speed_sigma at X")
    parser.add_argument("--preset", type=Path, default=PRESET, help="a synthetic experiment YAML (default: the "
                        "calibration preset)")
    args = parser.parse_args(argv)
    negative = [f"{flag} {value}" for flag, values in (("--margins", args.margins), ("--spreads", args.spreads),
                                                       ("--fix-spread", [args.fix_spread]), ("--refit", [args.refit]))
                for value in values if value is not None and value < 0]
    if negative:
        parser.error(f"margins, spreads and seconds are >= 0, got {', '.join(negative)}")
    if args.fix_spread is not None and not args.refit:
        parser.error("--fix-spread holds the spread of a refit: give --refit S as well")
    try:
        config = load_experiment(args.preset)
    except ExperimentConfigError as err:
        parser.error(str(err))
    if config.synthetic is None:
        parser.error(f"{args.preset}: no 'synthetic:' section, so nothing is planted")
    spec, models = config.synthetic, list(config.models)
    try:
        rates_at(spec, models, measured)
    except ValueError as err:  # e.g. judge: real, or per-problem effects: no closed form
        parser.error(f"{args.preset}: synthetic: {err}")
    print(f"# planted rates of {args.preset.name} ({len(models)} models, both directions pooled); attempt spread "
          f"{spec.attempt_speed_sigma}, judge noise margin {spec.judge_noise_margin}")
    print(HEADER.format("margin"))
    for margin in args.margins:
        print(_row(f"{margin:.3f}", rates_at(spec, models, margin)))
    print(f"\n# at the measured margin {measured}, by attempt_speed_sigma")
    print(HEADER.format("spread"))
    for spread in args.spreads:
        print(_row(f"{spread:.3f}", rates_at(spec.model_copy(update={"attempt_speed_sigma": spread}), models,
                                             measured)))
    if args.refit > 0:
        loss, moves = refit(spec, models, measured, args.refit, args.fix_spread)
        fitted = moved(spec, moves)
        print(f"\n# refit at {measured} ({args.refit:g} s): loss {loss:.1e}; "
              + ", ".join(f"{name} {value:.4f}" for name, value in moves.items()))
        print(HEADER.format("refit"))
        rates = rates_at(fitted, models, measured)
        print(_row("planted", rates))
        for model in [None, *models]:
            effect = fitted.effect(model)
            print(f"- {model or '(default)'}: skill_help_shift {effect.skill_help_shift:.2f}, source_pass_shift "
                  f"{effect.source_pass_shift:.2f}, closure_harm_per_claim {effect.closure_harm_per_claim:.2f}"
                  + (f"; enrichment {rates[f'enrichment {model}']:+.3f}" if model else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
