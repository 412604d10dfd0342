"""Where a finished attempt leaves its outcome before it reports back, so that no finished work depends on the
driver being alive: `<run_dir>/spool/<key>.json`, one file per Ray task, written by the task itself.

On a cluster run the driver can die (a head restart, a killed `mkb run`) while attempts it dispatched run on: their
tasks are owned by the run's launcher actor (`actors/trial_launcher.py`), not by the driver, and each writes its
outcomes here — artifact files first, straight into the run's content-addressed artifact store (`offload_artifacts`),
then the spool file naming them. A restarted driver ingests the spool into the SQLite store before it plans anything,
so an attempt that finished meanwhile is collected, not run again. The driver removes a spool file once its outcomes
are committed; a crash between commit and removal leaves a file whose trials are already done, which the next ingest
skips (writes are idempotent, keyed by trial id).

Files are written to a temporary name and renamed (atomic), so a reader sees a whole file or none. The spool and
the artifacts may live on a shared filesystem that every node mounts at the same path; the SQLite store may not
(it stays on the head's local disk: docs/cluster.md).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence

from ..records import StoredArtifact, TrialOutcome
from ..store.artifacts import ArtifactStore
from ..store.sqlite_store import ARTIFACTS_DIR

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from .plan import Plan
    from .protocols import OutcomeStore

SPOOL_DIR = "spool"
MARKER = ".mkb-shared"        # written by the driver: a node that does not see it does not see the run directory


class SpoolError(ValueError):
    """A spool file that cannot be read back; names the file."""


def spool_key(trial_ids: Sequence[str]) -> str:
    """The file name stem of a task's spool file: the same trials always give the same key (a retry of a task
    overwrites its own file, never adds a second one)."""
    return hashlib.sha256("\n".join(trial_ids).encode()).hexdigest()[:32]


def offload_artifacts(outcome: TrialOutcome, store: ArtifactStore) -> TrialOutcome:
    """The outcome with every artifact's bytes written into `store` and replaced by its address."""
    if not outcome.artifacts:
        return outcome
    blobs = {name: data for name, data in outcome.artifacts.items() if not isinstance(data, StoredArtifact)}
    hashed = {name: (hashlib.sha256(data).hexdigest(), bytes(data)) for name, data in blobs.items()}
    store.put_many(hashed.values())
    artifacts: dict[str, Any] = dict(outcome.artifacts)
    for name, (sha, data) in hashed.items():
        artifacts[name] = StoredArtifact(sha256=sha, size=len(data))
    return replace(outcome, artifacts=artifacts)


class OutcomeSpool:
    """The spool directory of one run (`<run_dir>/spool`)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.root = self.run_dir / SPOOL_DIR

    def mark(self) -> None:
        """Say, for the tasks' check, that this directory is the run's (the driver calls it)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / MARKER).write_text(str(self.run_dir), encoding="utf-8")

    def write(self, outcomes: Sequence[TrialOutcome]) -> list[TrialOutcome]:
        """Offload the outcomes' artifacts into the run's artifact store, then write their spool file; returns
        the outcomes as spooled (artifacts by address). Refuses, naming the path, on a node that does not see
        the directory the driver marked (a multi-node cluster without a shared directory): what it wrote there
        would be on this node's disk only, and the driver would never find it."""
        if not (self.run_dir / MARKER).is_file():
            import socket

            raise SpoolError(f"{self.run_dir} is not this run's shared directory as seen from node "
                             f"{socket.gethostname()} (no {MARKER}): on a multi-node cluster give `mkb run` "
                             "--shared-dir, a directory every node mounts at the same path (docs/cluster.md)")
        store = ArtifactStore(self.run_dir / ARTIFACTS_DIR)
        try:
            outcomes = [offload_artifacts(o, store) for o in outcomes]
        finally:
            store.close()
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{spool_key([o.trial_id for o in outcomes])}.json"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps([_encode(o) for o in outcomes]), encoding="utf-8")
        os.replace(tmp, path)
        return outcomes

    def files(self) -> list[Path]:
        return sorted(self.root.glob("*.json")) if self.root.is_dir() else []

    def read(self, path: Path) -> list[TrialOutcome]:
        try:
            return [_decode(item) for item in json.loads(path.read_text(encoding="utf-8"))]
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise SpoolError(f"{path}: not a spool file of outcomes ({type(err).__name__}: {err})") from None

    def entries(self) -> Iterator[tuple[Path, list[TrialOutcome]]]:
        for path in self.files():
            yield path, self.read(path)

    def remove(self, trial_ids: Sequence[str]) -> None:
        """Drop the spool file of the task that ran these trials (its outcomes are committed)."""
        (self.root / f"{spool_key(trial_ids)}.json").unlink(missing_ok=True)


@dataclass(frozen=True)
class DurableParts:
    """What lets a cluster run's attempts outlive its driver (`campaign.build.durable_parts` makes them)."""

    run_dir: str              # where tasks write (absolute, the same on every node): the run dir or its shared twin
    name: str                 # the run's name for its detached actors (launcher, evaluators, router)
    launcher: "ActorHandle"   # the run's TrialLauncher actor (actors/trial_launcher.py): it owns the trial tasks
    resumed: bool             # the launcher was left by an earlier driver of this run
    spool: OutcomeSpool       # where the tasks leave their outcomes


def share_run_dir(run_dir: Path, shared_root: Optional[Path]) -> Path:
    """Where a cluster run's tasks write (the directory they are given as `shared_run_dir`), made ready: the run
    directory itself, or, with `shared_root` (a directory every node mounts at the same path, which may be a
    network file system), `<shared_root>/<run dir name>`, with the run directory's `artifacts` and `spool` as
    symlinks into it — the SQLite store stays on the head's local disk, where it must be."""
    run_dir = Path(run_dir).resolve()
    if shared_root is None:
        OutcomeSpool(run_dir).mark()
        return run_dir
    target = Path(shared_root).resolve() / run_dir.name
    for name in (ARTIFACTS_DIR, SPOOL_DIR):
        (target / name).mkdir(parents=True, exist_ok=True)
        link = run_dir / name
        if link.is_symlink():
            if link.resolve() != (target / name).resolve():
                raise SpoolError(f"{link} points to {link.resolve()}, not to {target / name}: this run was "
                                 "started with another --shared-dir; use that one")
            continue
        if link.exists():
            if any(link.iterdir()):
                raise SpoolError(f"{link} already holds this run's files: the run was started without "
                                 "--shared-dir; resume it the same way, or move that directory to "
                                 f"{target / name} and rerun")
            link.rmdir()
        link.symlink_to(target / name, target_is_directory=True)
    OutcomeSpool(target).mark()
    return target


def ingest_spool(spool: OutcomeSpool, store: "OutcomeStore", plan: "Plan") -> int:
    """Commit the spooled outcomes of planned trials that are not stored yet, then drop their files; returns
    how many were committed. Skipped: trials already stored (the driver committed them before it stopped),
    trials no longer in the plan, and attempt errors (status `error`: possibly a model server that was down,
    which the scheduler re-runs rather than keeps). A file that cannot be read is kept and logged, not lost."""
    import logging

    done = store.done_ids()
    committed = 0
    for path in spool.files():
        try:
            outcomes = spool.read(path)
        except SpoolError as err:
            logging.getLogger(__name__).error("%s; kept for inspection", err)
            continue
        fresh = [o for o in outcomes if o.trial_id not in done and o.trial_id in plan and o.status != "error"]
        if fresh:
            store.write_outcomes(fresh)
            done.update(o.trial_id for o in fresh)
            committed += len(fresh)
            store.log_event("spool_ingested", None, file=path.name, trials=len(fresh))
        path.unlink(missing_ok=True)
    return committed


def _encode(outcome: TrialOutcome) -> dict[str, Any]:
    item = {f.name: getattr(outcome, f.name) for f in fields(outcome) if f.name != "artifacts"}
    item["artifacts"] = {name: ({"sha256": data.sha256, "size": data.size} if isinstance(data, StoredArtifact)
                                else {"base64": base64.b64encode(data).decode("ascii")})
                         for name, data in outcome.artifacts.items()}
    return item


def _decode(item: dict[str, Any]) -> TrialOutcome:
    artifacts: dict[str, Any] = {}
    for name, ref in item.pop("artifacts").items():
        artifacts[name] = (base64.b64decode(ref["base64"]) if "base64" in ref
                           else StoredArtifact(sha256=ref["sha256"], size=int(ref["size"])))
    return TrialOutcome(artifacts=artifacts, **item)
