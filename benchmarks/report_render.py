"""How long `mkb report` takes to render the synthetic chain-100 campaign (15,264 trials, ~30 claims per SKILL.md),
per stage, and its peak memory, against the target of 60 s on 2 cores.

    python benchmarks/report_render.py [--run-dir DIR] [--chains N] [--no-lineage] [--out DIR]

Without a store in DIR, plans and runs experiments/chain-100-synthetic.yaml there first (`mkb run`, ~1 min; with
`--chains N` a cut of it: the first models and problems that give N chains of 100 hops), then `mkb lineage` on it
(offline annotator + matcher: ~20 s per 1,000 SKILL.md, so ~5 min for the whole campaign) so that the report has
claims to highlight and edges to link; `--no-lineage` skips that. A DIR that already holds a store is only read
(the report opens it read-only), never written. The report is rendered in a fresh process, into --out (default: a
temporary folder, removed afterwards). With fewer than 15,264 trials the whole-campaign figure is extrapolated
linearly from the measured one, which overstates it: a small run's time is mostly fixed costs (plots, imports).
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"
CAMPAIGN = EXPERIMENTS / "chain-100-synthetic.yaml"
FULL_TRIALS = 15_264
TARGET_S = 60.0
N_PROBLEMS, N_START_DSLS = 12, 2

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
began = time.monotonic()
from mkb_ray.analysis.report.render import ReportOptions, render_report
import_s = time.monotonic() - began
summary = render_report(Path(sys.argv[1]), Path(sys.argv[2]), ReportOptions(lineage_n_boot=int(sys.argv[3])))
size = sum(p.stat().st_size for p in Path(sys.argv[2]).rglob("*") if p.is_file())
print(json.dumps({"seconds": summary.seconds, "import_s": import_s, "wall_s": time.monotonic() - began,
                  "trials": summary.n_trials, "trial_pages": summary.n_trial_pages, "list_pages": summary.n_list_pages,
                  "bytes": size, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def _merged(path: Path) -> dict:
    """An experiment YAML with its `base:` merged in (mappings key by key, the including file winning)."""
    data = yaml.safe_load(path.read_text())
    include = data.pop("base", None)
    if include is None:
        return data
    base = yaml.safe_load((path.parent / include).read_text())

    def merge(a: dict, b: dict) -> dict:
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out
    return merge(base, data)


def campaign_yaml(chains: int, folder: Path) -> Path:
    """chain-100-synthetic itself (chains 0), or a cut of it with at least `chains` chains: the first
    ceil(chains / 24) models and, with one model, the first ceil(chains / 2) problems."""
    if chains <= 0:
        return CAMPAIGN
    from mkb_ray.problems import load_problems

    data = _merged(CAMPAIGN)
    n_models = min(len(data["models"]), math.ceil(chains / (N_PROBLEMS * N_START_DSLS)))
    n_problems = N_PROBLEMS if n_models > 1 else min(N_PROBLEMS, math.ceil(chains / N_START_DSLS))
    ids = [p.problem_id for p in load_problems().problems][:n_problems]
    data.update(name=f"chain-100-synthetic-{chains}", models=data["models"][:n_models], problems={"ids": ids},
                description=f"SYNTHETIC chain-100 cut to {n_models} model(s) x {n_problems} problem(s)")
    path = folder / f"chain-100-synthetic-{chains}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _mkb(*args: str) -> float:
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "mkb_ray.cli", *args], check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    return time.monotonic() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="the run directory: rendered read-only when it holds a store, else the campaign is run "
                             "there first (default: /tmp/mkb-report-scale[-N], kept between runs)")
    parser.add_argument("--chains", type=int, default=0, metavar="N",
                        help="run a cut of the campaign with at least N chains (0: all 144)")
    parser.add_argument("--no-lineage", action="store_true", help="do not run `mkb lineage` on a new campaign")
    parser.add_argument("--lineage-n-boot", type=int, default=200, metavar="N",
                        help="bootstrap resamples of the lineage plots' bands (the report's default: 200)")
    parser.add_argument("--out", type=Path, default=None, help="keep the report here (default: a temporary folder)")
    args = parser.parse_args()

    run_dir = args.run_dir or Path(tempfile.gettempdir()) / (
        "mkb-report-scale" + (f"-{args.chains}" if args.chains else ""))
    given = (run_dir / "store.sqlite").is_file()    # an existing store is only read, never written
    campaign_s = lineage_s = 0.0
    if not given:
        with tempfile.TemporaryDirectory(prefix="mkb-report-yaml-") as tmp:
            campaign_s = _mkb("run", str(campaign_yaml(args.chains, Path(tmp))), "--run-dir", str(run_dir),
                              "--no-progress")
        if not args.no_lineage:
            lineage_s = _mkb("lineage", str(run_dir), "--no-plots", "--out", str(run_dir / "lineage"))
    out_parent = tempfile.mkdtemp(prefix="mkb-report-bench-") if args.out is None else None
    out = args.out if args.out is not None else Path(out_parent) / "report"
    try:
        child = subprocess.run([sys.executable, "-c", _CHILD, str(run_dir), str(out), str(args.lineage_n_boot)],
                               capture_output=True, text=True, cwd=REPO)
        if child.returncode != 0:
            print(child.stderr[-4000:], file=sys.stderr)
            return 1
    finally:
        if out_parent is not None:
            shutil.rmtree(out_parent, ignore_errors=True)
    result = json.loads(child.stdout.strip().splitlines()[-1])
    total = result["seconds"]["total"]
    trials = max(1, result["trials"])
    full = total * FULL_TRIALS / trials
    stages = ", ".join(f"{k} {v:.1f}" for k, v in result["seconds"].items() if k != "total")
    made = (f"; campaign run in {campaign_s:.0f} s" if campaign_s else "") + (
        f", mkb lineage in {lineage_s:.0f} s" if lineage_s else "")
    cut = f" cut to {args.chains}+ chains" if args.chains else ""
    what = "an existing store" if given else f"synthetic chain-100{cut}"
    print(f"report render of {run_dir} ({what}): "
          f"{result['trials']} trials, {result['trial_pages']} trial pages, {result['list_pages']} list pages, "
          f"{result['bytes'] / 2**20:.0f} MiB written{made}")
    print(f"  render {total:.1f} s (stages, s: {stages}); process {result['wall_s']:.1f} s with imports "
          f"{result['import_s']:.1f} s; peak memory {result['peak_rss_gb']:.2f} GB")
    print(f"  whole chain-100 campaign ({FULL_TRIALS:,} trials): {full:.1f} s "
          f"{'measured' if trials >= FULL_TRIALS else 'extrapolated linearly, an overestimate for a small cut'} vs "
          f"target {TARGET_S:.0f} s "
          f"(ratio {full / TARGET_S:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
