"""How long a newcomer waits: `make install` and `make run` from a clean clone, timed side by side in one run.

Issue 28's targets: the install <= 5 min where the registry allows, `make run` <= 10 min after it, on the 2-core
machine CI uses. This clones the committed HEAD (a clean clone: no .venv, no runs/, nothing ignored carried over),
runs the README's first command's two halves one after the other and prints each wall time with its target,
then reads the run's store for what `make run` promises: every planned trial completed, none skipped, a non-empty
SKILL.md from every attempt, the chain at its last hop, lineage and report written.

The machine's state is printed with the times (cores, load average before and after, whether pip had a warm
download cache): a figure taken while other work ran says so instead of passing for an idle-machine one.

    python3 benchmarks/quickstart_wall.py [--workdir DIR] [--keep] [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TARGET_S = 300.0
RUN_TARGET_S = 600.0


def timed(command: list[str], cwd: Path, log: Path) -> tuple[int, float]:
    """Run `command` in `cwd` with its output appended to `log`; (exit code, wall seconds)."""
    started = time.perf_counter()
    with log.open("ab") as sink:
        code = subprocess.call(command, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)
    return code, time.perf_counter() - started


def pip_cache_mb() -> float:
    cache = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip"))
    if not cache.is_dir():
        return 0.0
    return sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 2**20


def run_facts(clone: Path) -> list[str]:
    """What the store of `runs/quickstart` says about the promises of `make run` (see the module docstring)."""
    store = clone / "runs" / "quickstart" / "store.sqlite"
    if not store.exists():
        return [f"no store at {store}: make run did not get as far as the campaign"]
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as con:
        statuses = dict(con.execute("SELECT status, COUNT(*) FROM trials GROUP BY status").fetchall())
        planned = sum(statuses.values())
        skills = con.execute("SELECT COUNT(*) FROM trials WHERE status = 'completed' AND trial_id IN "
                             "(SELECT trial_id FROM skills WHERE bytes > 0)").fetchone()[0]
        hops = "SELECT MAX(hop) FROM trials WHERE kind = 'chain_hop'"
        last_hop = con.execute(hops + " AND status = 'completed'").fetchone()[0]
        planned_hop = con.execute(hops).fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        claims = con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] if "claims" in tables else None
    report = clone / "runs" / "quickstart" / "report" / "index.html"
    return [f"trials: {planned} planned; " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
            f"non-empty SKILL.md: {skills} of {statuses.get('completed', 0)} completed attempts",
            f"chain: last completed hop {last_hop} of {planned_hop} planned",
            f"lineage: {'written' if claims is not None else 'NOT written'} ({claims or 0} claims)",
            f"report: {'written' if report.exists() else 'NOT written'} ({report})"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, help="where to clone (default: a fresh temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its .venv, runs/ and make logs)")
    parser.add_argument("--out", type=Path, help="also write what is printed to this file")
    args = parser.parse_args()
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    head = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mkb-quickstart-"))
    clone = work / "mkb-ray"
    subprocess.check_call(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)])
    log = work / "make.log"
    say(f"quickstart wall: clean clone of {head} in {clone}; {os.cpu_count()} cores; load average before "
        f"{os.getloadavg()[0]:.2f}; pip download cache {pip_cache_mb():.0f} MB; make output in {log}")
    code, install_s = timed(["make", "install"], clone, log)
    say(f"make install: {install_s / 60:.1f} min (rc {code}); target <= {INSTALL_TARGET_S / 60:.0f} min: "
        f"{install_s / INSTALL_TARGET_S:.2f}x the target; load average after {os.getloadavg()[0]:.2f}")
    if code == 0:
        code, run_s = timed(["make", "run"], clone, log)
        say(f"make run:     {run_s / 60:.1f} min (rc {code}); target <= {RUN_TARGET_S / 60:.0f} min after the "
            f"install: {run_s / RUN_TARGET_S:.2f}x the target; load average after {os.getloadavg()[0]:.2f}")
        for fact in run_facts(clone):
            say("  " + fact)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
