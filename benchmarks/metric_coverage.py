"""Do the benchmark metrics' 95 % intervals cover the truth, and are the estimates biased? Many small SYNTHETIC
worlds with known truth, each analysed exactly as `mkb report` analyses a run.

A world (`mkb_ray/synthetic/worlds.py`) is a benchmark's cell-replicates drawn in memory from a synthetic spec: the
calibration preset's six models (`experiments/synthetic/paper-2610.05014.yaml`), `--problems` problems, both
directions, `--replicates` replicates — with per-problem difficulty and model × problem effects on the ordinal logit
scale (`--difficulty`, `--model-problem`), which the preset alone does not have. Each world is scored once
(`pairs.score_pairs`) and its pooled rows read from `paired_table` (T, H, ΔGM), `standing_table` and
`standing_gaps` (help / harm above and below, under the independent base draw and under the paper's grouping),
`enrichment_table` (closure enrichment, the generator's own labels) and `reverse_table` (reverse harm | helped),
with `--n-boot` resamples of the shipped bootstrap (problems as the unit).

The truth of a law is what the same functions give on one very large world of that law (`--truth-problems`
problems; its own sampling error is printed as `truth ± se`, from 4 independent large worlds). Laws:
  null      — `worlds.null_spec`: skills do nothing (skill attempt drawn exactly as its base); T = H, ΔGM 0, every
              standing gap and the enrichment 0 in truth.
  effect    — the preset's planted effects, with the same problem effects.
  flat      — the preset as it is (no problem effects); its truth is also checked against the closed forms of
              `planted.py` where they exist (T, H, standing).

Per law and metric it prints: truth, mean estimate, bias, the share of worlds whose 95 % interval covers the truth
(issue 27's bar: 90–98 %), the mean interval width, and for T, H, ΔGM the same coverage under the bootstrap this
project used until 2026-12-05 (resampling cells one by one; `cell boot`). Nothing is asserted.

    python3 benchmarks/metric_coverage.py                              # 200 worlds per law, ~10 min on 2 cores
    python3 benchmarks/metric_coverage.py --worlds 20 --n-boot 300     # a quick look
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mkb_ray.analysis.bootstrap import Bootstrap, per_unit_sums  # noqa: E402
from mkb_ray.analysis.cells import Attempt, CellReplicate  # noqa: E402
from mkb_ray.analysis.enrichment import enrichment_table  # noqa: E402
from mkb_ray.analysis.paired import paired_table  # noqa: E402
from mkb_ray.analysis.outcomes import PairingRules  # noqa: E402
from mkb_ray.analysis.pairs import PairTable, score_pairs  # noqa: E402
from mkb_ray.analysis.reverse import reverse_table  # noqa: E402
from mkb_ray.analysis.standing import standing_gaps, standing_table  # noqa: E402
from mkb_ray.campaign.config import load_experiment  # noqa: E402
from mkb_ray.synthetic.planted import planted_rates  # noqa: E402
from mkb_ray.synthetic.spec import SyntheticSpec, spec_taxonomy  # noqa: E402
from mkb_ray.synthetic.worlds import World, draw_world, null_spec  # noqa: E402

PRESET = REPO / "experiments" / "synthetic" / "paper-2610.05014.yaml"
Estimate = tuple[Optional[float], Optional[float], Optional[float]]     # value, lo, hi


@dataclass
class Tally:
    """One metric of one law over the worlds."""

    estimates: list[float] = field(default_factory=list)
    covered: int = 0
    with_interval: int = 0
    widths: list[float] = field(default_factory=list)
    cell_covered: int = 0
    cell_with_interval: int = 0

    def add(self, truth: float, got: Estimate, cell: Optional[tuple[Optional[float], Optional[float]]]) -> None:
        value, lo, hi = got
        if value is not None and not math.isnan(value):
            self.estimates.append(value)
        if lo is not None and hi is not None:
            self.with_interval += 1
            self.covered += lo <= truth <= hi
            self.widths.append(hi - lo)
        if cell is not None and cell[0] is not None and cell[1] is not None:
            self.cell_with_interval += 1
            self.cell_covered += cell[0] <= truth <= cell[1]


def metrics(pairs: PairTable, world: World, closure: str, n_boot: int, seed: int) -> dict[str, Estimate]:
    """Every checked metric of one world, pooled over models and directions, as the shipped functions give it."""
    out: dict[str, Estimate] = {}
    paired = paired_table(pairs, by=(), n_boot=n_boot, seed=seed).row(0, named=True)
    for name, column in (("T", "T"), ("H", "H"), ("ΔGM", "dgm")):
        out[name] = (paired[column], paired.get(f"{column}_lo"), paired.get(f"{column}_hi"))
    first = sorted({p.cr.model for p in pairs})[0]
    one = paired_table(pairs.where(lambda p: p.cr.model == first), by=(), n_boot=n_boot, seed=seed).row(0, named=True)
    out["T (one model)"] = (one["T"], one.get("T_lo"), one.get("T_hi"))
    for draw, label in (("independent", ""), ("paper", " [paper]")):
        rows = {r["standing"]: r for r in standing_table(pairs, by=(), n_boot=n_boot, seed=seed, draw=draw)
                .iter_rows(named=True)}
        for group, rate in (("above", "help_rate"), ("below", "harm_rate")):
            r = rows[group]
            out[f"{rate.split('_')[0]} | {group}{label}"] = (r[rate], r.get(f"{rate}_lo"), r.get(f"{rate}_hi"))
        gap = standing_gaps(pairs, by=(), n_boot=n_boot, seed=seed, draw=draw).row(0, named=True)
        for name in ("help_gap", "harm_gap"):
            out[f"{name}{label}"] = (gap[name], gap[f"{name}_lo"], gap[f"{name}_hi"])
    enrichment = enrichment_table(pairs, world.categories_of, [closure], by=(), n_boot=n_boot, seed=seed)
    e = enrichment.row(0, named=True)
    out["closure enrichment"] = (e["enrichment"], e["enrichment_lo"], e["enrichment_hi"])
    rev = reverse_table(pairs, by=(), pool_directions=True, n_boot=n_boot, seed=seed).row(0, named=True)
    out["reverse harm | help"] = (rev["share_harm"], rev.get("share_harm_lo"), rev.get("share_harm_hi"))
    return out


def cell_bootstrap(pairs: PairTable, n_boot: int, seed: int) -> dict[str, tuple[Optional[float], Optional[float]]]:
    """T, H and ΔGM intervals as this project drew them until 2026-12-05: cells resampled one by one."""
    cells: dict[tuple, list] = {}
    for p in pairs:
        cells.setdefault(p.cr.cell_key, []).append(p)
    stats = np.array([[sum(p.outcome == "help" for p in ps), sum(p.outcome == "harm" for p in ps), len(ps),
                       float(np.mean([p.log_ratio for p in ps]))] for ps in cells.values()])
    boot = Bootstrap(n_boot, seed)
    sums = boot.resampled_sums(per_unit_sums(list(range(len(stats))), stats), boot.rng())
    return {"T": boot.interval(sums[:, 0] / sums[:, 2]), "H": boot.interval(sums[:, 1] / sums[:, 2]),
            "ΔGM": boot.interval(np.expm1(sums[:, 3] / len(stats)))}


def analyse(spec: SyntheticSpec, models: list[str], problems: int, replicates: int, seed: int,
            n_boot: int) -> tuple[dict[str, Estimate], PairTable]:
    world = draw_world(spec, models, problems, replicates, seed)
    pairs = score_pairs(world.replicates(Attempt, CellReplicate))
    closure = spec_taxonomy(spec.taxonomy).closure_category
    return metrics(pairs, world, closure, n_boot, seed), pairs


def law_truth(spec: SyntheticSpec, models: list[str], problems: int, replicates: int, seed: int
              ) -> tuple[dict[str, float], dict[str, float]]:
    """The metrics on 4 large worlds of the law: their mean (the truth) and its standard error."""
    draws = [analyse(spec, models, problems, replicates, seed + k, 0)[0] for k in range(4)]
    names = draws[0].keys()
    values = {n: np.array([d[n][0] for d in draws], dtype=float) for n in names}
    return ({n: float(np.mean(v)) for n, v in values.items()},
            {n: float(np.std(v, ddof=1) / 2) for n, v in values.items()})


def run_law(name: str, spec: SyntheticSpec, models: list[str], args: argparse.Namespace,
            check: Optional[Callable[[dict[str, float]], dict[str, float]]] = None) -> list[str]:
    started = time.perf_counter()
    truth, truth_se = law_truth(spec, models, args.truth_problems, args.replicates, 10_000_000 + args.seed)
    tallies: dict[str, Tally] = {n: Tally() for n in truth}
    for w in range(args.worlds):
        got, pairs = analyse(spec, models, args.problems, args.replicates, args.seed + w, args.n_boot)
        old = cell_bootstrap(pairs, args.n_boot, args.seed + w)
        for metric, estimate in got.items():
            tallies[metric].add(truth[metric], estimate, old.get(metric))
    planted = check(truth) if check is not None else {}
    lines = [f"## law {name}: {args.worlds} worlds of {len(models)} models × {args.problems} problems × 2 directions "
             f"× {args.replicates} replicates; truth from 4 worlds of {args.truth_problems} problems "
             f"({time.perf_counter() - started:.0f} s)",
             f"{'metric':<24} {'truth ± se':>16} {'mean est':>9} {'bias':>8} {'cover':>7} {'width':>7} "
             f"{'cell boot':>9}" + ("   closed form" if planted else "")]
    for metric, t in tallies.items():
        mean = float(np.mean(t.estimates)) if t.estimates else math.nan
        cover = t.covered / t.with_interval if t.with_interval else math.nan
        width = float(np.mean(t.widths)) if t.widths else math.nan
        cell = (f"{t.cell_covered / t.cell_with_interval:9.1%}" if t.cell_with_interval else f"{'':>9}")
        extra = f"   {planted[metric]:+.4f}" if metric in planted else ""
        lines.append(f"{metric:<24} {truth[metric]:+8.4f} ± {truth_se[metric]:.4f} {mean:+9.4f} "
                     f"{mean - truth[metric]:+8.4f} {cover:7.1%} {width:7.3f} {cell}{extra}"
                     f"{'' if t.with_interval == args.worlds else f'  ({t.with_interval} intervals)'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, default=200, help="small worlds per law (default 200)")
    parser.add_argument("--problems", type=int, default=24, help="problems per small world (default 24)")
    parser.add_argument("--replicates", type=int, default=3, help="replicates per cell (default 3, as the benchmark)")
    parser.add_argument("--truth-problems", type=int, default=1500,
                        help="problems of each of the 4 large worlds the truth is read from (default 1500)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples per interval (default 1000)")
    parser.add_argument("--difficulty", type=float, default=1.0, help="problem_difficulty_sigma (logits; default 1)")
    parser.add_argument("--model-problem", type=float, default=0.5, help="model_problem_sigma (logits; default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="first world's seed (worlds use seed .. seed+worlds-1)")
    parser.add_argument("--law", nargs="*", default=["null", "effect", "flat"], choices=["null", "effect", "flat"])
    args = parser.parse_args()
    config = load_experiment(PRESET)
    assert config.synthetic is not None
    preset, models = config.synthetic, list(config.models)
    shaped = preset.model_copy(update={"problem_difficulty_sigma": args.difficulty,
                                       "model_problem_sigma": args.model_problem})

    def closed_form(_: dict[str, float]) -> dict[str, float]:
        rates = planted_rates(preset, models, PairingRules().margin("gpu", True))
        t, h = rates.help_harm()
        out = {"T": t, "H": h, "help | above": rates.standing("above")[1], "harm | below": rates.standing("below")[2],
               "help | above [paper]": rates.standing("above", draw="paper")[1],
               "harm | below [paper]": rates.standing("below", draw="paper")[2],
               "closure enrichment": rates.enrichment()[2], "reverse harm | help": rates.reverse()["harm"]}
        out["help_gap"] = out["help | above"] - rates.standing("below")[1]
        out["harm_gap"] = out["harm | below"] - rates.standing("above")[2]
        out["help_gap [paper]"] = out["help | above [paper]"] - rates.standing("below", draw="paper")[1]
        out["harm_gap [paper]"] = out["harm | below [paper]"] - rates.standing("above", draw="paper")[2]
        return out

    laws = {"null": (null_spec(shaped), None), "effect": (shaped, None), "flat": (preset, closed_form)}
    print(f"# metric coverage on SYNTHETIC worlds (drawn, not run): python3 benchmarks/metric_coverage.py "
          f"{' '.join(sys.argv[1:])}".rstrip())
    print(f"# problem effects: difficulty sigma {args.difficulty}, model × problem sigma {args.model_problem} "
          f"(null and effect laws; flat has none); bootstrap {args.n_boot} resamples, problems as the unit")
    for name in args.law:
        spec, check = laws[name]
        for line in run_law(name, spec, models, args, check):
            print(line, flush=True)
        print()


if __name__ == "__main__":
    main()
