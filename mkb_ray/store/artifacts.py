"""Content-addressed artifact files: kernels, SKILL.md, transcripts, records — `<root>/<sha[:2]>/<sha>`.

A file's name is the sha256 of its bytes, so a write is idempotent (an existing file is never rewritten) and a
file is either absent or complete: it is written to a temporary name in the same directory and renamed into place
(`os.replace` is atomic), so a process killed mid-write leaves at worst a stray `.tmp` file, never a truncated
artifact. Files are not fsynced: they survive the writing process being killed (kill -9), not a power loss —
the same guarantee as the SQLite store beside them (WAL, synchronous=NORMAL).
"""
from __future__ import annotations

import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Optional

# A batch with at least this many new files is written by a few threads: the syscalls release the GIL, and on
# a slow (virtualised) disk file creation, not hashing, is what costs.
PARALLEL_MIN_FILES = 32
WRITER_THREADS = 4

_SHA = re.compile(r"[0-9a-f]{64}")


class ArtifactMissing(KeyError):
    """No artifact with this sha256 in the store."""


class ArtifactStore:
    """Content-addressed files under `root` (a run's `<run_dir>/artifacts`)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._present: set[str] = set()     # shas known to be on disk (this process wrote or saw them)
        self._dirs: set[str] = set()        # shard directories known to exist
        self._tmp_seq = 0
        self._pool: Optional[ThreadPoolExecutor] = None

    def path(self, sha: str) -> Path:
        """Where the artifact with this sha256 (64 lowercase hex digits) lives."""
        if not _SHA.fullmatch(sha):
            raise ValueError(f"not a sha256 hex digest: {sha!r}")
        return self.root / sha[:2] / sha

    def put(self, data: bytes) -> str:
        """Store `data`; returns its sha256 hex digest. Skips the write when the file already exists."""
        sha = hashlib.sha256(data).hexdigest()
        self.put_hashed(sha, data)
        return sha

    def put_hashed(self, sha: str, data: bytes) -> None:
        """Store `data` whose sha256 the caller already computed (the run store hashes once per blob)."""
        self.put_many([(sha, data)])

    def put_many(self, blobs: Iterable[tuple[str, bytes]]) -> None:
        """Store several (sha256, bytes) pairs whose hashes the caller computed; returns once all are on disk."""
        jobs: list[tuple[str, str, bytes]] = []
        queued: set[str] = set()
        for sha, data in blobs:
            if sha in self._present or sha in queued:
                continue
            shard = sha[:2]
            directory = os.path.join(self.root, shard)
            final = os.path.join(directory, sha)
            if os.path.exists(final):
                self._present.add(sha)
                continue
            if shard not in self._dirs:
                os.makedirs(directory, exist_ok=True)
                self._dirs.add(shard)
            self._tmp_seq += 1
            jobs.append((os.path.join(directory, f".{sha}.{os.getpid()}.{self._tmp_seq}.tmp"), final, data))
            queued.add(sha)
        if len(jobs) >= PARALLEL_MIN_FILES:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="artifacts")
            list(self._pool.map(_write_jobs, [jobs[k::WRITER_THREADS] for k in range(WRITER_THREADS)]))
        else:
            _write_jobs(jobs)
        self._present.update(queued)

    def close(self) -> None:
        """Stop the writer threads (if any were started)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def get(self, sha: str) -> bytes:
        """The bytes of an artifact; `ArtifactMissing` when there is none."""
        try:
            return self.path(sha).read_bytes()
        except FileNotFoundError:
            raise ArtifactMissing(f"artifact {sha} is not in {self.root}") from None

    def has(self, sha: str) -> bool:
        return sha in self._present or self.path(sha).is_file()

    def verify(self, sha: str) -> bool:
        """True when the artifact exists and its bytes still hash to its name."""
        try:
            return hashlib.sha256(self.get(sha)).hexdigest() == sha
        except ArtifactMissing:
            return False


def _write_jobs(jobs: list[tuple[str, str, bytes]]) -> None:
    """Write each file under its temporary name, then rename it into place (atomic)."""
    for tmp, final, data in jobs:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)  # a dead process may have left it
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, final)
