"""The run store's claim tables (claims, skills_segmented, annotations, lineage_edges, lineage_runs): round trips,
idempotent re-writes, the markers that make reruns incremental, a store made before the tables, malformed records
refused by name, and their parquet export. Real SQLite on tmp_path; claims cut from SKILL.md texts by a stand-in
segmenter (one claim per bullet, with its span)."""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Callable

import polars as pl
import pytest

from mkb_ray.records.claims import AnnotationRecord, ClaimRecord, LineageEdgeRecord
from mkb_ray.campaign.reconcile import record_plan
from mkb_ray.store import RecordError, RunStore, Segmentation, StoreError, export_parquet
from mkb_ray.store.claims_tables import (CLAIM_TABLES, AnnotationRow, ClaimRow, LineageEdgeRow, LineageRunRow,
                                         SegmentedRow)
from test_store import PROBLEMS, make_outcome, make_trials

SEGMENTER = "bullets-1"
ANNOTATOR = "offline-1"
TAXONOMY = "mkb-11@1"
MATCHER = "minilm@0.62"
HOPS = (
    "# SKILL: fused add + RMSNorm\n## Mapping\n- One CTA per row; 256 threads reduce the sum of squares.\n"
    "- Keep the residual in registers.\n## Verification\n- Passed correctness in bf16 against eager.\n",
    "# SKILL\n## Mapping\n- One CTA per row, 256 threads reduce the sum of squares.\n"
    "- The residual must always stay in registers.\n- Vectorised 128-bit loads gave 1.8x.\n",
    "# SKILL\n- A CTA per row with 256 threads reducing the squares.\n- The residual must always stay in "
    "registers.\n- 128-bit loads may help.\n- The loop cannot be folded algebraically; keep it eager.\n",
)
EMPTY = "# SKILL\nNothing worked.\n"


def sha_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def cut(text: str) -> list[ClaimRecord]:
    """One claim per bullet line, with its span and the heading above it (the real segmenter's record shape)."""
    sha, claims, section, pos = sha_of(text), [], "", 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        if body.startswith("#"):
            section = body.lstrip("# ")
        elif body.startswith("- "):
            i = len(claims)
            claims.append(ClaimRecord(claim_id=f"{sha[:16]}.{i:03d}", skill_sha=sha, index=i, text=body[2:],
                                      start=pos + 2, end=pos + len(body), section=section))
        pos += len(line)
    return claims


def annotate(claims: list[ClaimRecord], annotator: str = ANNOTATOR) -> list[AnnotationRecord]:
    out = []
    for c in claims:
        if "cannot" in c.text:
            out.append(AnnotationRecord(claim_id=c.claim_id, annotator=annotator, taxonomy=TAXONOMY,
                                        category="unsupported_closure", modality="absolute", support="unsupported",
                                        support_reason="no submission tried folding it", confidence=0.8))
        elif "may" in c.text:
            out.append(AnnotationRecord(claim_id=c.claim_id, annotator=annotator, taxonomy=TAXONOMY,
                                        status="unannotated", reason="the model's reply was not JSON (3 tries)"))
        else:
            out.append(AnnotationRecord(claim_id=c.claim_id, annotator=annotator, taxonomy=TAXONOMY,
                                        category="hardware_mapping", modality="plain", support="supported",
                                        support_reason="submission 2: correct, speedup 1.7", confidence=0.6))
    return out


def link(parents: list[ClaimRecord], children: list[ClaimRecord], hop: int,
         chain: str = "chain0") -> list[LineageEdgeRecord]:
    """Child i descends from parent i (the last parent also splits into every extra child)."""
    return [LineageEdgeRecord(chain_id=chain, hop=hop, parent_id=parents[min(i, len(parents) - 1)].claim_id,
                              child_id=child.claim_id, edge="paraphrased" if i < len(parents) else "split",
                              similarity=0.9 - 0.01 * i, matcher=MATCHER)
            for i, child in enumerate(children)]


@pytest.fixture
def store(tmp_path: Path):
    with RunStore(tmp_path / "run") as s:
        s.set_meta(json.dumps({"name": "claims"}), "h" * 64, synthetic=False)
        yield s


def filled(store: RunStore) -> list[list[ClaimRecord]]:
    """The three hops segmented (plus an empty SKILL.md), annotated and linked; returns each hop's claims."""
    hops = [cut(t) for t in HOPS]
    store.claims.write_segmentations([Segmentation(sha_of(t), SEGMENTER, c) for t, c in zip(HOPS, hops)])
    store.claims.write_segmentation(sha_of(EMPTY), SEGMENTER, cut(EMPTY))
    store.claims.write_annotations([a for claims in hops for a in annotate(claims)])
    store.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 2, link(hops[0], hops[1], 1) + link(hops[1], hops[2], 2))
    return hops


def rows(store: RunStore, table: str, drop_at: bool = True) -> list[tuple[Any, ...]]:
    columns = [r[1] for r in store.connection.execute(f"PRAGMA table_info({table})") if not (drop_at and r[1] == "at")]
    quoted = ", ".join(f'"{c}"' for c in columns)
    return sorted(store.connection.execute(f"SELECT {quoted} FROM {table}").fetchall(), key=repr)


def snapshot(store: RunStore) -> dict[str, list[tuple[Any, ...]]]:
    return {table: rows(store, table) for table in CLAIM_TABLES}


# -- round trips ----------------------------------------------------------------------------------------------------
def test_row_types_are_the_tables_columns(store: RunStore) -> None:
    for table, row in zip(CLAIM_TABLES, (ClaimRow, SegmentedRow, AnnotationRow, LineageEdgeRow, LineageRunRow)):
        assert tuple(r[1] for r in store.connection.execute(f"PRAGMA table_info({table})")) == row._fields
        assert store.connection.execute(f"SELECT sql FROM sqlite_master WHERE name = '{table}'"
                                        ).fetchone()[0].rstrip().endswith("STRICT, WITHOUT ROWID")


def test_claims_round_trip_in_order(store: RunStore) -> None:
    hops = filled(store)
    for text, claims in zip(HOPS, hops):
        assert store.claims.claims_of(sha_of(text)) == claims
        assert [text[c.start:c.end] for c in store.claims.claims_of(sha_of(text))] == [c.text for c in claims]
    assert store.claims.claims_of(sha_of(EMPTY)) == [] and store.claims.claims_of("f" * 64) == []
    wanted = [sha_of(HOPS[2]), sha_of(EMPTY), sha_of(HOPS[0])]
    assert store.claims.claims_by_skill(wanted) == {wanted[0]: hops[2], wanted[1]: [], wanted[2]: hops[0]}
    assert store.claims.claim_count() == sum(map(len, hops)) == 10
    # The section and the 0-based index travel; ids are unique across texts.
    assert hops[0][2].section == "Verification" and hops[0][2].index == 2


def test_segmented_markers_include_texts_without_claims(store: RunStore) -> None:
    filled(store)
    everything = {sha_of(t) for t in (*HOPS, EMPTY)}
    assert store.claims.segmented_skills(SEGMENTER) == everything == store.claims.segmented_skills()
    assert store.claims.segmented_skills("sentences-2") == set()
    marks = dict(store.connection.execute("SELECT skill_sha, n_claims FROM skills_segmented"))
    assert marks[sha_of(EMPTY)] == 0 and marks[sha_of(HOPS[2])] == 4


def test_annotations_round_trip(store: RunStore) -> None:
    hops = filled(store)
    expected = {a.claim_id: a for claims in hops for a in annotate(claims)}
    assert store.claims.annotations(ANNOTATOR, TAXONOMY) == expected
    some = [hops[2][2].claim_id, hops[2][3].claim_id, "no-such-claim"]
    got = store.claims.annotations(ANNOTATOR, TAXONOMY, claim_ids=some)
    assert set(got) == set(some[:2])
    assert got[some[0]].status == "unannotated" and got[some[0]].reason.startswith("the model's reply")
    assert got[some[1]].category == "unsupported_closure" and got[some[1]].confidence == 0.8
    # Another annotator, or the same one under another taxonomy, is kept apart.
    store.claims.write_annotations(annotate(hops[0], annotator="llm:glm-5.3:p1"))
    assert set(store.claims.annotations("llm:glm-5.3:p1", TAXONOMY)) == {c.claim_id for c in hops[0]}
    assert store.claims.annotations(ANNOTATOR, "mkb-11@2") == {}
    assert store.claims.annotations(ANNOTATOR, TAXONOMY) == expected


def test_lineage_round_trip_and_progress(store: RunStore) -> None:
    hops = filled(store)
    edges = link(hops[0], hops[1], 1) + link(hops[1], hops[2], 2)
    assert store.claims.lineage_edges("chain0") == sorted(edges, key=lambda e: (e.hop, e.child_id, e.parent_id))
    assert store.claims.lineage_edges(matcher=MATCHER) == store.claims.lineage_edges() == \
        store.claims.lineage_edges("chain0", MATCHER)
    assert store.claims.lineage_edges("chain1") == [] and store.claims.lineage_edges(matcher="llm-judge") == []
    assert store.claims.lineage_progress(MATCHER, ANNOTATOR) == {"chain0": 2}
    assert store.claims.lineage_progress(MATCHER, "llm:glm-5.3:p1") == {}
    assert store.claims.lineage_progress("x", ANNOTATOR) == {}
    # A second chain sharing the texts (same claims), matched one hop at a time: progress grows, edges add up.
    store.claims.write_lineage("chain1", MATCHER, ANNOTATOR, 1, link(hops[0], hops[1], 1, chain="chain1"))
    assert store.claims.lineage_progress(MATCHER, ANNOTATOR) == {"chain0": 2, "chain1": 1}
    store.claims.write_lineage("chain1", MATCHER, ANNOTATOR, 2, link(hops[1], hops[2], 2, chain="chain1"))
    assert store.claims.lineage_progress(MATCHER, ANNOTATOR) == {"chain0": 2, "chain1": 2}
    assert [(e.parent_id, e.child_id, e.edge) for e in store.claims.lineage_edges("chain1")] == \
        [(e.parent_id, e.child_id, e.edge) for e in store.claims.lineage_edges("chain0")]
    # A hop whose claims were all born there has no edges, and is still marked done.
    store.claims.write_lineage("chain1", MATCHER, ANNOTATOR, 3, [])
    assert store.claims.lineage_progress(MATCHER, ANNOTATOR)["chain1"] == 3


def test_rewrites_change_nothing(store: RunStore) -> None:
    hops = filled(store)
    before = snapshot(store)
    items = [Segmentation(sha_of(t), SEGMENTER, c) for t, c in zip(HOPS, hops)]
    assert store.claims.write_segmentations(items) == set()
    assert store.claims.write_segmentation(sha_of(EMPTY), SEGMENTER, []) is False
    store.claims.write_annotations([a for claims in hops for a in annotate(claims)])
    store.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 2, link(hops[0], hops[1], 1) + link(hops[1], hops[2], 2))
    # Duplicates within one batch are fine when identical.
    store.claims.write_annotations(annotate(hops[0]) * 2)
    assert snapshot(store) == before


def test_a_changed_segmentation_replaces_what_came_from_it(store: RunStore) -> None:
    """Another segmenter cuts hop 1 differently: its old claims go, with their annotations, the edges that touch
    them and the marker of the chain those edges were in (it must be matched again); the rest is kept."""
    hops = filled(store)
    store.claims.write_lineage("chain9", MATCHER, ANNOTATOR, 1, link(hops[1], hops[2], 1, chain="chain9"))  # untouched
    sha = sha_of(HOPS[0])
    recut = [c.model_copy(update={"text": c.text.upper()}) for c in hops[0][:2]]
    assert store.claims.write_segmentation(sha, "sentences-2", recut) is True
    assert store.claims.claims_of(sha) == recut
    assert sha in store.claims.segmented_skills("sentences-2") and sha not in store.claims.segmented_skills(SEGMENTER)
    kept = store.claims.annotations(ANNOTATOR, TAXONOMY)
    assert set(kept) == {c.claim_id for c in hops[1] + hops[2]}
    assert {(e.chain_id, e.hop) for e in store.claims.lineage_edges()} == {("chain0", 2), ("chain9", 1)}
    assert store.claims.lineage_progress(MATCHER, ANNOTATOR) == {"chain9": 1}
    assert store.connection.execute("PRAGMA foreign_key_check").fetchall() == []
    # chain0 is matched again from scratch: its surviving hop-2 edges are replaced, not kept beside new ones.
    new_hop1 = link(recut, hops[1], 1)
    new_hop2 = [e.model_copy(update={"edge": "copied", "similarity": 0.99}) for e in link(hops[1], hops[2], 2)[:2]]
    store.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 2, new_hop1 + new_hop2)
    assert store.claims.lineage_edges("chain0") == sorted(new_hop1 + new_hop2, key=lambda e: (e.hop, e.child_id,
                                                                                        e.parent_id))
    assert store.claims.lineage_progress(MATCHER, ANNOTATOR) == {"chain0": 2, "chain9": 1}


def test_rematching_hops_replaces_their_edges(store: RunStore) -> None:
    """first_hop names the hops a write re-matches: their stored edges are replaced, earlier hops kept."""
    hops = filled(store)
    fewer = link(hops[1], hops[2], 2)[1:]
    store.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 2, fewer, first_hop=2)
    assert store.claims.lineage_edges("chain0") == sorted(link(hops[0], hops[1], 1) + fewer,
                                                   key=lambda e: (e.hop, e.child_id, e.parent_id))
    store.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 2, [], first_hop=1)
    assert store.claims.lineage_edges("chain0") == []
    assert store.claims.lineage_progress(MATCHER, ANNOTATOR) == {"chain0": 2}


def test_skill_text_by_sha_matches_the_trials(tmp_path: Path) -> None:
    """A chain hop's SKILL.md is found by the trial's skill_sha, and is the text the claims' skill_sha hashes."""
    trials = [t for t in make_trials(hops=3) if t.kind == "chain_hop" and t.problem_id == PROBLEMS[0]]
    with RunStore(tmp_path / "run") as store:
        store.set_meta("{}", "h" * 64, synthetic=False)
        record_plan(store, trials)
        store.write_outcomes([make_outcome(t, skill=text) for t, text in zip(trials, HOPS)])
        by_trial = {r.trial_id: r.skill_sha for r in store.trial_rows()}
        for trial, text in zip(trials, HOPS):
            assert by_trial[trial.trial_id] == sha_of(text) == cut(text)[0].skill_sha
            assert store.skill_text_of(by_trial[trial.trial_id]) == text == store.skill_text(trial.trial_id)
        assert store.skill_text_of("0" * 64) is None


# -- older stores, readers ------------------------------------------------------------------------------------------
def test_a_store_made_before_the_claim_tables_gains_them(tmp_path: Path) -> None:
    run = tmp_path / "run"
    trials = make_trials(hops=0)
    with RunStore(run) as store:
        store.set_meta("{}", "h" * 64, synthetic=False)
        record_plan(store, trials)
        store.write_outcomes([make_outcome(t) for t in trials[:3]])
    conn = sqlite3.connect(run / "store.sqlite")
    for table in ("lineage_runs", "lineage_edges", "annotations", "skills_segmented", "claims"):
        conn.execute(f"DROP TABLE {table}")
    conn.commit()
    conn.close()
    with RunStore(run, readonly=True) as reader:   # a reader cannot create them: it reads them as empty
        assert reader.claims.segmented_skills(SEGMENTER) == set() and reader.claims.claims_of(sha_of(HOPS[0])) == []
        assert reader.claims.annotations(ANNOTATOR, TAXONOMY) == {} and reader.claims.lineage_edges() == []
        assert reader.claims.lineage_progress(MATCHER, ANNOTATOR) == {} and reader.claims.claim_count() == 0
    assert not set(CLAIM_TABLES) & set(export_parquet(run, tmp_path / "before"))
    with RunStore(run) as store:                   # the writer creates them, and keeps everything else
        names = {r[0] for r in store.connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert set(CLAIM_TABLES) <= names
        assert store.done_ids() == {t.trial_id for t in trials[:3]}
        hops = filled(store)
        assert store.claims.claims_of(sha_of(HOPS[1])) == hops[1]
    with RunStore(run, readonly=True) as reader:
        assert reader.claims.claims_of(sha_of(HOPS[1])) == hops[1]
        with pytest.raises(StoreError, match="readonly"):
            reader.claims.write_segmentation(sha_of(EMPTY), SEGMENTER, [])


# -- malformed records ----------------------------------------------------------------------------------------------
def _claim(**changes: Any) -> dict[str, Any]:
    return {**cut(HOPS[0])[0].model_dump(), **changes}


SHA0 = sha_of(HOPS[0])


@pytest.mark.parametrize("write, kind, field", [
    (lambda s, h: s.claims.write_segmentation(SHA0, SEGMENTER, [_claim(start="3")]), "claim", "start"),
    (lambda s, h: s.claims.write_segmentation(SHA0, SEGMENTER, [_claim(end=-1)]), "claim", "end"),
    (lambda s, h: s.claims.write_segmentation(SHA0, SEGMENTER, [_claim(colour="red")]), "claim", "colour"),
    (lambda s, h: s.claims.write_segmentation(SHA0, SEGMENTER, [ClaimRecord.model_construct(**_claim(index=-2))]),
     "claim", "index"),
    (lambda s, h: s.claims.write_segmentation(SHA0, SEGMENTER, [_claim(start=40, end=10)]), "claim", "end"),
    (lambda s, h: s.claims.write_segmentation(SHA0, SEGMENTER, cut(HOPS[0])[1:]), "claim", "index"),
    (lambda s, h: s.claims.write_segmentation(sha_of(HOPS[1]), SEGMENTER, cut(HOPS[0])), "claim", "skill_sha"),
    (lambda s, h: s.claims.write_segmentation(SHA0, SEGMENTER, [_claim(), _claim(index=1)]), "claim", "claim_id"),
    (lambda s, h: s.claims.write_segmentation(SHA0, "", cut(HOPS[0])), "segmentation", "segmenter"),
    (lambda s, h: s.claims.write_annotations([annotate(h[0])[0].model_copy(update={"category": None})]),
     "annotation", "category"),
    (lambda s, h: s.claims.write_annotations([{**annotate(h[0])[0].model_dump(), "modality": "certain"}]),
     "annotation", "modality"),
    (lambda s, h: s.claims.write_annotations([{**annotate(h[0])[0].model_dump(), "confidence": 1.5}]),
     "annotation", "confidence"),
    (lambda s, h: s.claims.write_annotations([AnnotationRecord(claim_id=h[0][0].claim_id, annotator=ANNOTATOR,
                                                        taxonomy=TAXONOMY, status="unannotated")]),
     "annotation", "reason"),
    (lambda s, h: s.claims.write_annotations([annotate(h[0])[0].model_copy(update={"claim_id": "feedface.000"})]),
     "annotation", "claim_id"),
    (lambda s, h: s.claims.write_annotations([annotate(h[0])[0], annotate(h[0])[0].model_copy(update={"support":
                                                                                              "contradicted"})]),
     "annotation", "claim_id"),
    (lambda s, h: s.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 0, link(h[0], h[1], 1)), "lineage edge", "hop"),
    (lambda s, h: s.claims.write_lineage("chain7", MATCHER, ANNOTATOR, 1, link(h[0], h[1], 1)), "lineage edge",
     "chain_id"),
    (lambda s, h: s.claims.write_lineage("chain0", "other", ANNOTATOR, 1, link(h[0], h[1], 1)), "lineage edge",
     "matcher"),
    (lambda s, h: s.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 1, [{**link(h[0], h[1], 1)[0].model_dump(),
                                                                      "similarity": 1.2}]),
     "lineage edge", "similarity"),
    (lambda s, h: s.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 1, [{**link(h[0], h[1], 1)[0].model_dump(),
                                                                      "edge": "mutated"}]),
     "lineage edge", "edge"),
    (lambda s, h: s.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 1, [link(h[0], h[1], 1)[0].model_copy(
        update={"child_id": "feedface.001"})]), "lineage edge", "claim_id"),
    (lambda s, h: s.claims.write_lineage("chain0", MATCHER, ANNOTATOR, -1, []), "lineage run", "hops_done"),
    (lambda s, h: s.claims.write_lineage("chain0", MATCHER, "", 1, []), "lineage run", "annotator"),
    (lambda s, h: s.claims.write_lineage("chain0", MATCHER, ANNOTATOR, 2, [], first_hop=0), "lineage run", "first_hop"),
])
def test_malformed_records_are_refused_by_name(store: RunStore, write: Callable, kind: str, field: str) -> None:
    """A bad record refuses its whole batch before anything is written; the error names the record and field."""
    hops = filled(store)
    before = snapshot(store)
    with pytest.raises(RecordError) as err:
        write(store, hops)
    assert (err.value.kind, err.value.field) == (kind, field), str(err.value)
    assert str(err.value).startswith(f"{kind} ") and f": {field}: " in str(err.value)
    assert snapshot(store) == before


def test_a_bad_record_late_in_a_batch_leaves_nothing(store: RunStore) -> None:
    hops = [cut(t) for t in HOPS]
    items = [Segmentation(sha_of(t), SEGMENTER, c) for t, c in zip(HOPS, hops)]
    items[-1] = Segmentation(items[-1].skill_sha, SEGMENTER, [*hops[2][:-1], _claim(index=3, skill_sha="x")])
    with pytest.raises(RecordError, match=r"^claim .*: skill_sha: "):
        store.claims.write_segmentations(items)
    assert store.claims.claim_count() == 0 and store.claims.segmented_skills() == set()
    store.claims.write_segmentations(items[:2])
    store.claims.write_annotations(annotate(hops[0]))
    with pytest.raises(RecordError, match="no such claim"):   # hop 2 was never written
        store.claims.write_annotations(annotate(hops[1]) + annotate(hops[2]))
    assert set(store.claims.annotations(ANNOTATOR, TAXONOMY)) == {c.claim_id for c in hops[0]}


# -- export ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("synthetic", [False, True])
def test_export_writes_the_claim_tables(tmp_path: Path, synthetic: bool) -> None:
    run = tmp_path / "run"
    trials = [t for t in make_trials(hops=3) if t.kind == "chain_hop" and t.problem_id == PROBLEMS[0]]
    with RunStore(run) as store:
        store.set_meta("{}", "h" * 64, synthetic=synthetic)
        record_plan(store, trials)
        store.write_outcomes([make_outcome(t, skill=text, synthetic=synthetic) for t, text in zip(trials, HOPS)])
        hops = filled(store)
    paths = export_parquet(run, tmp_path / "out")
    assert {"claims", "annotations", "lineage_edges"} <= set(paths)
    assert not {"skills_segmented", "lineage_runs"} & set(paths)
    claims = pl.read_parquet(paths["claims"])
    assert claims.columns == [*ClaimRow._fields, "synthetic"]
    assert claims.height == 10 and claims.schema["end"] == pl.Int64 and claims.schema["synthetic"] == pl.Boolean
    assert claims["synthetic"].to_list() == [synthetic] * 10
    first = claims.filter(pl.col("skill_sha") == sha_of(HOPS[0])).sort("idx")
    assert first["text"].to_list() == [c.text for c in hops[0]] and first["start"].to_list() == [c.start
                                                                                               for c in hops[0]]
    annotations = pl.read_parquet(paths["annotations"])
    assert annotations.height == 10 and annotations.schema["confidence"] == pl.Float64
    assert annotations.filter(pl.col("status") == "unannotated")["category"].to_list() == [None]
    edges = pl.read_parquet(paths["lineage_edges"])
    assert edges.columns == [*LineageEdgeRow._fields, "synthetic"] and edges.height == 7
    assert sorted(edges["edge"].unique().to_list()) == ["paraphrased", "split"]
    assert edges.filter(pl.col("hop") == 2).height == 4
    assert edges["synthetic"].to_list() == [synthetic] * 7


def test_claims_of_a_measured_run_are_not_synthetic(tmp_path: Path) -> None:
    """Texts no trial wrote (stripped of their ground truth, say) take the run's flag."""
    run = tmp_path / "run"
    with RunStore(run) as store:
        store.set_meta("{}", "h" * 64, synthetic=False)
        filled(store)
    claims = pl.read_parquet(export_parquet(run, tmp_path / "out")["claims"])
    assert not claims["synthetic"].any()


def test_no_claim_files_without_rows(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run") as store:
        store.set_meta("{}", "h" * 64, synthetic=False)
        record_plan(store, make_trials(hops=0)[:1])
    paths = export_parquet(tmp_path / "run", tmp_path / "out")
    assert not set(CLAIM_TABLES) & set(paths) and not (tmp_path / "out" / "claims.parquet").exists()
