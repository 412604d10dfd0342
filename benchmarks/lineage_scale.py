"""How long `mkb lineage` (offline annotator + matcher) takes on a synthetic chain-100 campaign, and its peak memory.

    python benchmarks/lineage_scale.py [--run-dir DIR] [--chains N]

Plans and runs experiments/chain-100-synthetic.yaml (15,264 synthetic attempts, ~30 claims per SKILL.md; ~1 min)
into DIR unless DIR already holds it, then runs the lineage pipeline on a copy of the store in a fresh process and
prints, per stage, seconds and seconds per 1,000 SKILL.md files, the peak resident memory, and both against the
targets of issue 10 (whole campaign < 20 min, < 4 GB on 2 cores). `--chains N` keeps N chains (a quicker sample;
the printed per-1,000 figures then extrapolate).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAMPAIGN = REPO / "experiments" / "chain-100-synthetic.yaml"
TARGET_S, TARGET_GB = 20 * 60, 4.0

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from mkb_ray.claims.offline import OfflineAnnotator
from mkb_ray.claims.taxonomy import load_taxonomy
from mkb_ray.lineage.pipeline import LineagePipeline, chain_hops
from mkb_ray.store import RunStore
run_dir, keep = Path(sys.argv[1]), int(sys.argv[2])
stages = {}
began = time.monotonic()
def progress(stage, done, total):
    stages.setdefault(stage, [time.monotonic(), 0.0])[1] = time.monotonic()
with RunStore(run_dir) as store:
    rows = list(store.trial_rows())
    chains = list(chain_hops(rows))[:keep] if keep else []
    pipeline = LineagePipeline(store, OfflineAnnotator(load_taxonomy()), load_taxonomy(), progress=progress)
    load_s = time.monotonic() - began
    if keep:
        summaries = [pipeline.run(c) for c in chains]
        skills = sum(s.skills_segmented for s in summaries)
        claims = sum(s.claims_new for s in summaries)
        edges = sum(s.edges_new for s in summaries)
    else:
        s = pipeline.run()
        skills, claims, edges = s.skills_segmented, s.claims_new, s.edges_new
    total_s = time.monotonic() - began
    pipeline_rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    from mkb_ray.analysis.lineage_data import load_lineage
    from mkb_ray.analysis.propagation import headline_table
    t = time.monotonic()
    data = load_lineage(store, pipeline.matcher, pipeline.annotator.name, pipeline.taxonomy.ref)
    headline_table(data.nodes, data.edges)
    analysis_s = time.monotonic() - t
print(json.dumps({"skills": skills, "claims": claims, "edges": edges, "pipeline_s": total_s, "startup_s": load_s,
                  "analysis_s": analysis_s, "encoded": pipeline.encoder.encoded, "pipeline_rss_gb": pipeline_rss_gb,
                  "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def ensure_campaign(run_dir: Path) -> float:
    """Run the synthetic campaign into run_dir unless it is there; returns the seconds it took (0 if reused)."""
    if (run_dir / "store.sqlite").is_file():
        return 0.0
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "mkb_ray.cli", "run", str(CAMPAIGN), "--run-dir", str(run_dir),
                    "--no-progress"], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, default=Path(tempfile.gettempdir()) / "mkb-lineage-scale",
                        help="where the synthetic campaign is (run there first if missing)")
    parser.add_argument("--chains", type=int, default=0, metavar="N", help="only N chains (0: all)")
    args = parser.parse_args()
    campaign_s = ensure_campaign(args.run_dir)
    with tempfile.TemporaryDirectory(prefix="mkb-lineage-bench-") as tmp:
        work = Path(tmp) / "run"
        shutil.copytree(args.run_dir, work, ignore=shutil.ignore_patterns("lineage"))
        child = subprocess.run([sys.executable, "-c", _CHILD, str(work), str(args.chains)], check=True,
                               capture_output=True, text=True, cwd=REPO)
    result = json.loads(child.stdout.strip().splitlines()[-1])
    per_1000 = result["pipeline_s"] / max(1, result["skills"]) * 1000
    full = 15264 / 1000 * per_1000 + result["analysis_s"] * (15264 / max(1, result["skills"]))
    print(f"lineage scale (offline annotator + matcher), {result['skills']} SKILL.md, {result['claims']} claims "
          f"({result['encoded']} distinct texts embedded), {result['edges']} edges"
          + (f"; campaign run in {campaign_s:.0f} s" if campaign_s else ""))
    print(f"  pipeline {result['pipeline_s']:.1f} s (model load {result['startup_s']:.1f} s), "
          f"{per_1000:.1f} s per 1,000 SKILL.md; analysis (headline table) {result['analysis_s']:.1f} s")
    print(f"  peak memory {result['peak_rss_gb']:.2f} GB (after the pipeline, before the analysis: "
          f"{result['pipeline_rss_gb']:.2f} GB)")
    print(f"  whole chain-100 campaign (15,264 SKILL.md): {full / 60:.1f} min "
          f"{'measured' if result['skills'] >= 15264 else 'extrapolated'} vs target {TARGET_S / 60:.0f} min "
          f"(ratio {full / TARGET_S:.2f}); memory {result['peak_rss_gb']:.2f} GB vs {TARGET_GB:.0f} GB "
          f"(ratio {result['peak_rss_gb'] / TARGET_GB:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
