"""`mkb export RUN [--parquet] [--results-json] [--out DIR]`: export a run store (both formats when neither flag
is given; default DIR: RUN/export). Exit codes: 0 written, 2 no run store at RUN (or one this version cannot read).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import store_missing

HELP = "export a run's store as parquet tables and per-model results.json"
DESCRIPTION = ("Write RUN's store as polars-readable parquet tables and MetaKernelBench-style results.json files "
               "(synthetic rows are labelled).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN", help="the run directory (holds store.sqlite)")
    parser.add_argument("--parquet", action="store_true",
                        help="every table as <table>.parquet (polars), with a synthetic column in each")
    parser.add_argument("--results-json", action="store_true",
                        help="MetaKernelBench-compatible <model>/results.json per model")
    parser.add_argument("--out", type=Path, metavar="DIR", help="where to write (default: RUN/export)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.results_json import export_results_json
    from ..store.export import export_parquet
    from ..store.sqlite_store import StoreError

    run_dir: Path = args.run
    if store_missing(run_dir, "export"):
        return 2
    out: Path = args.out if args.out is not None else run_dir / "export"
    both = not args.parquet and not args.results_json
    written: list[Path] = []
    try:
        if args.parquet or both:
            written += export_parquet(run_dir, out).values()
        if args.results_json or both:
            written += export_results_json(run_dir, out)
    except StoreError as err:
        print(f"mkb export: {err}", file=sys.stderr)
        return 2
    from ._console import make_console

    console = make_console()
    for path in written:
        console.print(f"wrote {path}")
    return 0
