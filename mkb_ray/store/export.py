"""Export of a run store as parquet tables (polars). MetaKernelBench's `results.json` is written by the analysis
(`mkb_ray/analysis/results_json.py`), which owns the metrics it carries.

Parquet (`export_parquet`): one file per table — trials, submissions, usage, skills, artifacts, events — with the
store's columns (see `sqlite_store`'s schema; booleans as Boolean, `depends_on` as a list of ids) and a `synthetic`
column in every table (a child row takes its trial's flag; an event its trial's, else the run's), plus
`meta.json` (the run's resolved config), so synthetic numbers are labelled wherever they travel. The claim tables
— claims, annotations, lineage_edges — are written too when they hold rows; as they are keyed by SKILL.md text, not
by trial, their `synthetic` is the run's flag or that of any trial that wrote the claim's text.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .sqlite_store import RunStore

BOOLEAN_COLUMNS = {"synthetic", "is_final", "counted", "compiled", "correct", "ok"}
_POLARS_TYPES = {"INTEGER": "Int64", "REAL": "Float64", "TEXT": "Utf8"}

# SELECTs of the exported tables. Each ends with a `synthetic` column: the row's trial's flag, or the run's (a
# trial not run yet in a synthetic run is synthetic too). `{trial_columns}` is the trials table without it.
_SYNTHETIC = "MAX(t.synthetic, :run_synthetic)"
_TABLE_SQL = {
    "trials": f"SELECT {{trial_columns}}, {_SYNTHETIC} AS synthetic FROM trials t ORDER BY t.plan_order",
    "submissions": f"SELECT c.*, {_SYNTHETIC} AS synthetic FROM submissions c JOIN trials t USING (trial_id) "
                   "ORDER BY t.plan_order, c.idx",
    "usage": f"SELECT c.*, {_SYNTHETIC} AS synthetic FROM usage c JOIN trials t USING (trial_id) "
             "ORDER BY t.plan_order, c.idx",
    "skills": f"SELECT c.*, {_SYNTHETIC} AS synthetic FROM skills c JOIN trials t USING (trial_id) "
              "ORDER BY t.plan_order",
    "artifacts": f"SELECT c.*, {_SYNTHETIC} AS synthetic FROM artifacts c JOIN trials t USING (trial_id) "
                 "ORDER BY t.plan_order, c.name",
    "events": f"SELECT e.*, COALESCE({_SYNTHETIC}, :run_synthetic) AS synthetic FROM events e "
              "LEFT JOIN trials t USING (trial_id) ORDER BY e.id",
}
# The claim tables, written only when they hold rows. A claim's text may come from several trials: it is synthetic
# when the run is, or when any trial that wrote this text is. Claims by text, their annotations and edges by claim.
_SKILL_SYNTHETIC = ("WITH syn AS (SELECT skill_sha, MAX(synthetic) AS synthetic FROM trials "
                    "WHERE skill_sha IS NOT NULL GROUP BY skill_sha) ")
_CLAIM_SYNTHETIC = "MAX(COALESCE(syn.synthetic, 0), :run_synthetic) AS synthetic"
_CLAIM_TABLE_SQL = {
    "claims": f"{_SKILL_SYNTHETIC}SELECT c.*, {_CLAIM_SYNTHETIC} FROM claims c LEFT JOIN syn USING (skill_sha) "
              "ORDER BY c.skill_sha, c.idx",
    "annotations": f"{_SKILL_SYNTHETIC}SELECT a.*, {_CLAIM_SYNTHETIC} FROM annotations a "
                   "LEFT JOIN claims c USING (claim_id) LEFT JOIN syn ON syn.skill_sha = c.skill_sha "
                   "ORDER BY a.annotator, a.taxonomy, a.claim_id",
    "lineage_edges": f"{_SKILL_SYNTHETIC}SELECT e.*, {_CLAIM_SYNTHETIC} FROM lineage_edges e "
                     "LEFT JOIN claims c ON c.claim_id = e.child_id LEFT JOIN syn ON syn.skill_sha = c.skill_sha "
                     "ORDER BY e.chain_id, e.matcher, e.hop, e.child_id, e.parent_id",
}

# -- parquet ----------------------------------------------------------------------------------------------------
def export_parquet(run_dir: Path, out_dir: Path) -> dict[str, Path]:
    """Write every store table as `<out_dir>/<table>.parquet` (+ `meta.json`; the claim tables only when they
    hold rows); returns {table: path}."""
    import polars as pl

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    with RunStore(Path(run_dir), readonly=True) as store:
        conn = store.connection
        meta = store.meta()
        run_synthetic = int(bool(meta.get("synthetic", False)))
        conn.execute("BEGIN")  # one snapshot for every table, even while the driver writes
        try:
            for table, sql in _TABLE_SQL.items():
                declared = {r[1]: r[2] for r in conn.execute(f"PRAGMA table_info({table})")}
                trial_columns = ", ".join(f"t.{c}" for c in declared if c != "synthetic")
                cursor = conn.execute(sql.format(trial_columns=trial_columns), {"run_synthetic": run_synthetic})
                columns = [d[0] for d in cursor.description]
                rows = cursor.fetchall()
                schema = {c: _polars_type(pl, c, declared.get(c, "INTEGER")) for c in columns}
                if table == "trials":
                    schema["depends_on"] = pl.List(pl.Utf8)
                    at = columns.index("depends_on")
                    rows = [r[:at] + (json.loads(r[at]),) + r[at + 1:] for r in rows]
                frame = pl.DataFrame(rows, schema=schema, orient="row")
                written[table] = atomic_write(out_dir / f"{table}.parquet", frame.write_parquet)
            present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table, sql in _CLAIM_TABLE_SQL.items():
                if table not in present or conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None:
                    continue
                declared = {r[1]: r[2] for r in conn.execute(f"PRAGMA table_info({table})")}
                cursor = conn.execute(sql, {"run_synthetic": run_synthetic})
                columns = [d[0] for d in cursor.description]
                schema = {c: _polars_type(pl, c, declared.get(c, "INTEGER")) for c in columns}
                frame = pl.DataFrame(cursor.fetchall(), schema=schema, orient="row")
                written[table] = atomic_write(out_dir / f"{table}.parquet", frame.write_parquet)
        finally:
            conn.execute("COMMIT")
    meta_path = out_dir / "meta.json"
    atomic_write(meta_path, lambda p: Path(p).write_text(json.dumps(meta, indent=2, default=str)))
    written["meta"] = meta_path
    return written


def _polars_type(pl: Any, column: str, declared: str) -> Any:
    if column in BOOLEAN_COLUMNS:
        return pl.Boolean
    return getattr(pl, _POLARS_TYPES.get(declared.upper(), "Utf8"))


def atomic_write(path: Path, write: Any) -> Path:
    """`write(tmp)` then rename tmp onto `path`: a reader never sees a half-written file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
    return path
