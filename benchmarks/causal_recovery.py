"""Do synthetic campaigns recover the effects their intervention arms plant? (issue 29, Done-when 1)

Runs `mkb run` on experiments/synthetic/causal-synthetic.yaml once per seed (the shipped campaign path: planner,
scheduler, hand-off builder, synthetic trials, store), then scores the causal table `mkb report` shows
(`analysis.causal.causal_table` over `intervention_pairs(result_rows(store))`) against the planted effect of each row
(`analysis.causal_calibration`: the generator's law applied to the texts each attempt read). Prints every row and,
per kind of row, how many planted effects are recovered: sign right (a planted 0: the interval covers 0) AND the
planted value inside the 95 % interval. Nothing is asserted: the numbers are the result.

    python3 benchmarks/causal_recovery.py [--seeds 29 30 31] [--out /tmp/causal-recovery]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "experiments" / "synthetic" / "causal-synthetic.yaml"


def run_seed(seed: int, out: Path) -> Path:
    run_dir = out / f"seed{seed}"
    config = out / f"causal-synthetic-seed{seed}.yaml"
    config.write_text(f"base: {CONFIG}\nname: causal-synthetic-seed{seed}\nsynthetic:\n  seed: {seed}\n")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "mkb_ray.cli", "run", str(config), "--run-dir", str(run_dir),
                    "--no-progress"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    print(f"seed {seed}: mkb run {time.monotonic() - started:.0f} s", flush=True)
    return run_dir


def score(run_dir: Path):  # type: ignore[no-untyped-def]
    from mkb_ray.analysis.calibration import run_spec
    from mkb_ray.analysis.causal import causal_table, intervention_pairs
    from mkb_ray.analysis.causal_calibration import causal_calibration
    from mkb_ray.analysis.cells import result_rows
    from mkb_ray.store import RunStore

    with RunStore(run_dir, readonly=True) as store:
        spec = run_spec(store.meta())
        assert spec is not None, f"{run_dir}: not a synthetic run"
        pairs = intervention_pairs(result_rows(store))
        return causal_calibration(store, pairs, spec, table=causal_table(pairs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[29, 30, 31])
    parser.add_argument("--out", type=Path, default=Path("/tmp/causal-recovery"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import polars as pl

    tables = []
    for seed in args.seeds:
        table = score(run_seed(seed, args.out)).with_columns(seed=pl.lit(seed))
        tables.append(table)
    allrows = pl.concat(tables)
    allrows = allrows.with_columns(recovered=pl.col("sign_right") & pl.col("net_covered"))
    pl.Config.set_tbl_rows(200)
    pl.Config.set_tbl_cols(20)
    pl.Config.set_tbl_width_chars(200)
    shown = allrows.select("seed", "intervention", "model", "n", "n_identical", "net", "net_lo", "net_hi",
                           "planted_net", "sign_right", "net_covered", "d_pass", "planted_d_pass", "d_pass_covered")
    print(shown.with_columns(pl.col(pl.Float64).round(3)))
    print("\nrecovered (sign right and planted net inside the 95 % interval), by intervention, all seeds and models:")
    summary = (allrows.group_by("intervention").agg(rows=pl.len(), recovered=pl.col("recovered").sum(),
                                                    d_pass_covered=pl.col("d_pass_covered").sum())
               .sort("intervention"))
    print(summary)
    total, hit = len(allrows), int(allrows["recovered"].sum())
    causal = allrows.filter(pl.col("intervention").str.starts_with("ablate") |
                            pl.col("intervention").str.starts_with("gate"))
    print(f"\nall rows: {hit}/{total} recovered ({hit / total:.1%}); claim-ablation and gate rows: "
          f"{int(causal['recovered'].sum())}/{len(causal)} ({causal['recovered'].mean():.1%}); "
          f"d_pass covered {int(allrows['d_pass_covered'].sum())}/{total}")


if __name__ == "__main__":
    main()
