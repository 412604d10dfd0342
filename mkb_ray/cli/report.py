"""`mkb report RUN [--out DIR]`: a self-contained static HTML report of a run store (default DIR: RUN/report).
Exit codes: 0 written, 2 bad arguments or no run store at RUN (or one this version cannot read).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import store_missing

HELP = "a static HTML report of a run: every table and plot, with a drill-down page per trial"
DESCRIPTION = """Write a self-contained HTML report of RUN's store (no JavaScript, nothing fetched; open index.html
from the file system): the run's header (name, config hash, targets; a SYNTHETIC banner on every page of a synthetic
run), paired outcomes (T, H, ΔGM) by model × direction and overall, MetaKernelBench's ladder, relative standing,
reverse-direction coupling, ΔGM per problem (plot), category enrichment (when `mkb lineage` annotated the claims)
and the claim-propagation headline table with survival and prevalence plots (when it matched the chains). Every
table row links to the trials it aggregates; every trial has a page with its submissions and verdicts, final kernel,
SKILL.md (claims highlighted by category, linked to their parents on the previous hop) and transcript. Tables are
also written under DIR/tables/ as CSV, parquet and Markdown (tables.md). The store is opened read-only.

examples:
  mkb report runs/quickstart                           # -> runs/quickstart/report/index.html
  mkb report runs/chain-100 --out /tmp/chain-100-report --lineage-n-boot 0
  mkb report runs/benchmark-6model --annotator llm:glm-5.3:v1 --taxonomy mkb-11@1
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("run", type=Path, metavar="RUN", help="the run directory (holds store.sqlite)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="where the report goes (default: RUN/report)")
    parser.add_argument("--n-boot", type=int, default=1000, metavar="N",
                        help="bootstrap resamples for the benchmark tables' intervals (default 1000; 0: none)")
    parser.add_argument("--lineage-n-boot", type=int, default=200, metavar="N",
                        help="bootstrap resamples for the survival and prevalence bands (default 200; 0: none)")
    parser.add_argument("--noise", type=float, default=None, metavar="FRACTION",
                        help="relative time difference below which two passing kernels tie (default: the "
                             "judge's timing noise measured per target and kernel-time class, "
                             "analysis/noise_margins.json; 0.92 for synthetic attempts)")
    parser.add_argument("--fail-factor", type=float, default=1.0, metavar="X",
                        help="a failed attempt's end-to-end time in ΔGM, as a multiple of the problem's eager time "
                             "(default 1: it falls back to PyTorch, tying with a pass no faster than eager; above "
                             "1 a fail scores below every pass, as T/H have it; docs/metrics.md)")
    parser.add_argument("--slow-pass-own-time", action="store_true",
                        help="in ΔGM, a pass slower than eager counts its own kernel time (the paper's unclipped "
                             "reading; ΔGM can then disagree with T/H in sign) instead of running at eager speed")
    parser.add_argument("--annotator", metavar="NAME",
                        help="whose annotations to report (default: offline-v1 when stored, else the most used)")
    parser.add_argument("--taxonomy", metavar="NAME@VERSION",
                        help="the taxonomy of those annotations (default: mkb-11@1 when stored)")
    parser.add_argument("--matcher", metavar="NAME",
                        help="whose lineage edges to report (default: the one `mkb lineage` ran with the annotator)")
    parser.add_argument("--no-trial-pages", action="store_true", help="skip the per-trial pages (tables only)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.paired import PairingRules
    from ..analysis.report.render import ReportOptions, render_report
    from ..store.sqlite_store import StoreError

    run_dir: Path = args.run
    if store_missing(run_dir, "report"):
        return 2
    if args.n_boot < 0 or args.lineage_n_boot < 0:
        print("mkb report: --n-boot and --lineage-n-boot must be ≥ 0", file=sys.stderr)
        return 2
    if args.noise is not None and args.noise < 0:
        print(f"mkb report: --noise must be ≥ 0, got {args.noise}", file=sys.stderr)
        return 2
    if not args.fail_factor >= 1:
        print(f"mkb report: --fail-factor must be ≥ 1 (a fail is never faster than eager), got {args.fail_factor}",
              file=sys.stderr)
        return 2
    rules = PairingRules(noise=args.noise, fail_factor=args.fail_factor,
                         slow_pass_runs_eager=not args.slow_pass_own_time)
    options = ReportOptions(rules=rules, n_boot=args.n_boot, lineage_n_boot=args.lineage_n_boot,
                            annotator=args.annotator, taxonomy=args.taxonomy, matcher=args.matcher,
                            trial_pages=not args.no_trial_pages)
    out: Path = args.out if args.out is not None else run_dir / "report"
    try:
        summary = render_report(run_dir, out, options)
    except StoreError as err:
        print(f"mkb report: {err}", file=sys.stderr)
        return 2
    from ._console import make_console

    console = make_console()
    label = " (SYNTHETIC run)" if summary.synthetic else ""
    console.print(f"wrote {summary.index}{label}: {summary.n_trial_pages} trial pages, {summary.n_list_pages} list "
                  f"pages, {len(summary.tables)} table files under {out / 'tables'}; "
                  f"{summary.seconds['total']:.1f} s")
    from ..analysis.report.summary import run_summary
    from ..store import RunStore

    with RunStore(run_dir, readonly=True) as store:
        for line in run_summary(store, summary.index, args.annotator, args.taxonomy):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0
