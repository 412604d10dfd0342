"""`mkb report`: the static HTML report of a run store. A small run (test_export's `build_run`, plus a two-hop chain
with claims, annotations and a lineage edge) is rendered into tmp_path; the numbers on the page are worked out by
hand from the fixture below; every link resolves; hostile text stays text; synthetic runs say so on every page."""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import subprocess
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import polars as pl
import pytest
from test_export import OTHER, build_run
from test_store import MODEL, PROBLEMS, make_outcome, make_trials

from mkb_ray.analysis.report.trials import file_stem
from mkb_ray.claims.segment import segment
from mkb_ray.cli.report import add_arguments
from mkb_ray.cli.report import run as report_from_args
from mkb_ray.records import chain_id_of
from mkb_ray.records.claims import AnnotationRecord, LineageEdgeRecord
from mkb_ray.campaign.reconcile import record_plan
from mkb_ray.store import RunStore

HOSTILE = "<script>alert(1)</script>"
ANNOTATOR, TAXONOMY, MATCHER = "offline-v1", "mkb-11@1", "match-v2@0.40+offline-v1"
CHAIN = chain_id_of(MODEL, PROBLEMS[1], 0)
H0 = f"{CHAIN}/h0"
H1 = f"{CHAIN}/h1"
SKILL_H0 = ("# Notes\n- Fusing the reduction into one kernel pass halves the memory traffic here.\n"
            "- Blocks of 128 threads seem to suit this problem on sm_90a.\n")
SKILL_H1 = ("# Notes\n- Fusing the reduction into one kernel pass halves the memory traffic here.\n"
            "- Nothing will ever beat eager PyTorch for this decode kernel on any GPU.\n")


def _annotate(claim_id: str, category: str) -> AnnotationRecord:
    return AnnotationRecord(claim_id=claim_id, annotator=ANNOTATOR, taxonomy=TAXONOMY, category=category,
                            modality="plain", support="unsupported")


def build_report_run(run_dir: Path, synthetic: bool = False) -> None:
    """build_run (two models, every status) plus, for the report:
    - chain0 of PROBLEMS[1]: h0 (SKILL_H0: claims a0 performance_evidence, a1 hardware_mapping) and h1 (SKILL_H1:
      b0 copied from a0, b1 unsupported_closure, born); h1's transcript holds HOSTILE, and so does its kernel;
    - one annotated claim in each source SKILL.md of MODEL's first problem: solo_cutedsl's verified_reformulation,
      solo_tirx's unsupported_closure.
    """
    build_run(run_dir, synthetic=synthetic)
    trials = {t.trial_id: t for t in make_trials() + make_trials(model=OTHER, problems=PROBLEMS[:1], hops=0)}
    h0 = make_outcome(trials[H0], tier="pass", skill=SKILL_H0, synthetic=synthetic)
    h1 = make_outcome(trials[H1], tier="fail", skill=SKILL_H1, synthetic=synthetic)
    h1.artifacts["transcript.jsonl"] = (
        json.dumps({"event": "message", "role": "assistant", "content": f"try this {HOSTILE}", "turn": 1,
                    "tool_calls": [{"id": "c1", "name": "write_file", "arguments": f'{{"content": "{HOSTILE}"}}'}]})
        + "\nnot json at all " + HOSTILE + "\n").encode()
    h1.artifacts["final_kernel.py"] = f"# {HOSTILE}\ndef solve(*inputs):\n    return inputs[0]\n".encode()
    a, b = segment(SKILL_H0), segment(SKILL_H1)
    assert len(a) == 2 and len(b) == 2
    sources = {}
    for dsl in ("cutedsl", "tirx"):
        text = f"# SKILL\n- {PROBLEMS[0]}: fuse the reduction ({dsl})\n"
        sources[dsl] = segment(text)
        assert len(sources[dsl]) == 1
    with RunStore(run_dir) as store:
        store.write_outcomes([h0, h1])
        for claims in (a, b, sources["cutedsl"], sources["tirx"]):
            store.claims.write_segmentation(claims[0].skill_sha, "segment-v1", claims)
        store.claims.write_annotations([
            _annotate(a[0].claim_id, "performance_evidence"), _annotate(a[1].claim_id, "hardware_mapping"),
            _annotate(b[0].claim_id, "performance_evidence"), _annotate(b[1].claim_id, "unsupported_closure"),
            _annotate(sources["cutedsl"][0].claim_id, "verified_reformulation"),
            _annotate(sources["tirx"][0].claim_id, "unsupported_closure")])
        store.claims.write_lineage(CHAIN, MATCHER, ANNOTATOR, 1, [LineageEdgeRecord(
            chain_id=CHAIN, hop=1, parent_id=a[0].claim_id, child_id=b[0].claim_id, edge="copied", similarity=1.0,
            matcher=MATCHER)])


def render(run: Path, out: Path, *extra: str) -> int:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return report_from_args(parser.parse_args([str(run), "--out", str(out), *extra]))


# -- reading the pages back ---------------------------------------------------------------------------------------
class _Tables(HTMLParser):
    """Every table of a page as rows of cell texts, keyed by the id of the h3 above it."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._heading: str = ""
        self._rows: list[list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "h3":
            self._heading = dict(attrs).get("id") or ""
        elif tag == "table":
            self._rows = []
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._rows:
            self._rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table" and self._rows is not None:
            self.tables[self._heading] = self._rows
            self._rows = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables_of(page: Path) -> dict[str, dict[tuple[str, ...], dict[str, str]]]:
    """table id -> {row key (the leading text columns) -> {header: cell}}."""
    parser = _Tables()
    parser.feed(page.read_text())
    out = {}
    for name, rows in parser.tables.items():
        header, body = rows[0], rows[1:]
        keyed = {}
        for cells in body:
            row = dict(zip(header, cells))
            key = tuple(row[h] for h in header if h in ("model", "direction", "category", "problem",
                                                        "grouping", "source vs base", "given", "hop", "cause", "judge",
                                                        "rule cause", "metric"))
            keyed[key] = row
        out[name.removeprefix("table-")] = keyed
    return out


def hrefs(page: Path) -> list[str]:
    return re.findall(r'href="([^"]+)"', page.read_text())


# -- the tests --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    build_report_run(root / "run")
    assert render(root / "run", root / "out", "--n-boot", "50", "--lineage-n-boot", "20") == 0
    return root / "out"


def test_index_tables_hold_the_numbers_worked_out_by_hand(report: Path) -> None:
    t = tables_of(report / "index.html")
    # MODEL, first problem (the only resolved cells): cutedsl2tirx: source solo_cutedsl pass, base solo_tirx fail
    # (eager 0.9 ms), skill pass2x at 0.43 ms -> help, ΔGM 0.9/0.43 - 1 = +1.093. tirx2cutedsl: source fail, base
    # solo_cutedsl pass at 0.43 ms, skill fail (eager 0.9 ms) -> harm, ΔGM 0.43/0.9 - 1 = -0.522.
    paired = t["paired_by_model_direction"]
    up, down = paired[(MODEL, "cutedsl2tirx")], paired[(MODEL, "tirx2cutedsl")]
    assert (up["pairs"], up["help"], up["harm"]) == ("1", "1", "0") and up["T"].startswith("1.000")
    assert up["ΔGM"].startswith("+1.093") and down["ΔGM"].startswith("-0.522") and down["H"].startswith("1.000")
    assert (OTHER, "cutedsl2tirx") not in paired          # OTHER's skill arms never ran: nothing resolved
    overall = t["paired_overall"][()]
    # The two cells' ratios are reciprocal: ΔGM exactly 0; T = H = 1/2.
    assert overall["pairs"] == "2" and overall["T"].startswith("0.500") and overall["ΔGM"].startswith("+0.000")
    # Ladder: skill pass2x at 2.5x reaches R@0..R@2 (S 80), the failed base none; base pass at 1.2x: S 60.
    ladder = t["ladder"]
    assert ladder[(MODEL, "cutedsl2tirx")]["skill S"] == "80.0" and ladder[(MODEL, "cutedsl2tirx")]["lift S"] == "+80.0"
    assert ladder[(MODEL, "tirx2cutedsl")]["base S"] == "60.0" and ladder[(MODEL, "tirx2cutedsl")]["lift S"] == "-60.0"
    assert ladder[(OTHER, "cutedsl2tirx")]["resolved"] == "0/1"
    standing = t["standing"]
    paper = "own base (paper)"
    assert standing[(MODEL, paper, "above")]["n"] == "1" and standing[(MODEL, paper, "above")]["help rate"] == "1.000"
    assert standing[(MODEL, paper, "below")]["harm rate"] == "1.000" and standing[(MODEL, paper, "same")]["n"] == "0"
    # One replicate per cell: no independent base draw, so the default grouping places none of the two pairs.
    independent = "another replicate's base"
    assert all(standing[(MODEL, independent, s)]["n"] == "0" and standing[(MODEL, independent, s)]["unplaced"] == "2"
               for s in ("above", "same", "below"))
    reverse = t["reverse"]
    assert reverse[(MODEL, "cutedsl2tirx", "help")]["reverse harm"] == "1.000"
    lift = t["problem_lift"]
    assert lift[(PROBLEMS[0], "cutedsl2tirx")]["ΔGM"].startswith("+1.093")
    # Enrichment: the helped cell's source holds verified_reformulation, the harmed one's unsupported_closure.
    enrichment = t["enrichment"]
    assert enrichment[(MODEL, "unsupported_closure")]["enrichment"].startswith("+1.000")
    assert enrichment[(MODEL, "verified_reformulation")]["enrichment"].startswith("-1.000")
    assert enrichment[(MODEL, "hardware_mapping")]["enrichment"].startswith("+0.000")
    # Lineage headline, prevalence at hop 1 = mean over the two chains: PROBLEMS[1]'s hop 1 holds b0
    # (performance_evidence) and b1 (unsupported_closure), 1/2 each; PROBLEMS[0]'s hop 1 (an error that still wrote
    # solo_tirx's SKILL.md text) holds one unsupported_closure claim. a0's lineage reaches hop 1 (censored there),
    # a1's dies: survival at t = 1 is 1 and 0.
    head = t["lineage_headline"]
    assert head[("performance_evidence",)]["prevalence h1"] == "0.250"
    assert head[("unsupported_closure",)]["prevalence h1"] == "0.750"
    assert head[("hardware_mapping",)]["prevalence h1"] == "0.000"
    assert head[("performance_evidence",)]["survival t1"] == "1.000"
    assert head[("hardware_mapping",)]["survival t1"] == "0.000"
    # Beside it, the closure headline corrected for offline-v1's recorded gold error (mkb lineage prints the same).
    corrected = t["lineage_corrected"]
    assert ("unsupported_closure", "prevalence (mean over hops)") in corrected
    assert ("unsupported_closure", "survival_t2") in corrected and ("unsupported_closure", "reinforced") in corrected
    # Chains: two hops (h0, h1) in each of two chains ran (h1 of mlp_norm as an error); no chain baseline ran, so
    # every hop is neutral (the per-hop numbers themselves are worked out in tests/test_chains.py).
    hops = t["chain_hops"]
    assert {k: (v["hops"], v["help"], v["harm"]) for k, v in hops.items()} == {("0",): ("2", "0", "0"),
                                                                            ("1",): ("2", "0", "0")}
    page = (report / "index.html").read_text()
    # Closures received vs harm: both chains' hop 1 received a hop-0 SKILL.md without a closure (a0, a1 and their
    # like) and neither hop is harmed (no baseline ran): harm rate 0 with none received, undefined (–) with some,
    # and no slope (the received share never varies).
    assert "Closures received vs harm" in page
    assert ("Over 2 chain hops (2 chains): harm rate 0.000 at hops whose received SKILL.md held no unsupported "
            "closure, – at hops whose did; slope of harm on the received closure share –") in page
    assert "<svg" in page and "Per-problem lift" in page       # the ΔGM bars and the lineage plots, inline
    assert page.count("<svg") >= 3
    assert "smollm2" in page and "e" * 64 in page and "gpu" in page   # header: run, config hash, target


def test_every_link_resolves_and_every_trial_has_a_page(report: Path) -> None:
    with RunStore(report.parent / "run", readonly=True) as store:
        ids = [r.trial_id for r in store.trial_rows()]
    pages = sorted((report / "trials").glob("*.html"))
    assert len(pages) == len(ids)
    for page in [report / "index.html", report / "trials.html", *report.glob("lists/*.html"), *pages]:
        for href in hrefs(page):
            parts = urlsplit(href)
            assert not parts.scheme and not parts.netloc, (page, href)       # relative only: works from file://
            target = (page.parent / parts.path).resolve() if parts.path else page
            assert target.is_file(), (page, href)
            if parts.fragment:
                assert f'id="{parts.fragment}"' in target.read_text(), (page, href)
    index_links = hrefs(report / "index.html")
    assert any(h.startswith("lists/paired_by_model_direction-") for h in index_links)
    listed = (report / "lists" / "paired_by_model_direction-0.html").read_text()
    assert f"{MODEL}__{PROBLEMS[0].replace('/', '__')}__r0__cutedsl2tirx_skill.html" in listed


def test_trial_pages_show_transcript_submissions_and_linked_claims(report: Path) -> None:
    h1 = (report / "trials" / (H1.replace("/", "__") + ".html")).read_text()
    assert "<script" not in h1 and "&lt;script&gt;alert(1)&lt;/script&gt;" in h1
    assert "not json at all" in h1 and "tool call: write_file" in h1           # the unreadable line is kept
    assert 'id="transcript"' in h1 and 'id="submissions"' in h1
    assert "max abs error 3e-2 exceeds the allowance" in h1                     # a verdict's reason
    a, b = segment(SKILL_H0), segment(SKILL_H1)
    # b0 links to its parent a0 on h0's page; a0 links forward to b0.
    assert f'id="c-{b[0].claim_id}"' in h1 and f'id="c-{b[1].claim_id}"' in h1
    assert f'href="{H0.replace("/", "__")}.html#c-{a[0].claim_id}"' in h1
    h0 = (report / "trials" / (H0.replace("/", "__") + ".html")).read_text()
    assert f'href="{H1.replace("/", "__")}.html#c-{b[0].claim_id}"' in h0
    assert 'data-category="unsupported_closure"' in h1 and 'data-category="hardware_mapping"' in h0
    for page in (report).rglob("*.html"):
        assert "<script" not in page.read_text(), page                           # no JavaScript anywhere


def test_tables_are_written_as_csv_parquet_and_markdown(report: Path) -> None:
    folder = report / "tables"
    for name in ("paired_by_model_direction", "paired_overall", "ladder", "standing", "reverse", "problem_lift",
                 "enrichment", "lineage_headline"):
        assert pl.read_csv(folder / f"{name}.csv").height == pl.read_parquet(folder / f"{name}.parquet").height > 0
    paired = pl.read_parquet(folder / "paired_by_model_direction.parquet")
    row = paired.filter((pl.col("model") == MODEL) & (pl.col("direction") == "cutedsl2tirx")).row(0, named=True)
    assert row["T"] == 1.0 and row["dgm"] == pytest.approx(0.9 / 0.43 - 1)
    md = (folder / "tables.md").read_text()
    assert "## Paired outcomes by model × direction" in md and "| model | direction |" in md
    assert f"| {MODEL} | cutedsl2tirx | 1 | 1 | 1 | 0 | 0 | 1.000" in md and "SYNTHETIC" not in md


def test_a_synthetic_run_says_so_on_every_page(tmp_path: Path) -> None:
    build_run(tmp_path / "run", synthetic=True)
    assert render(tmp_path / "run", tmp_path / "out", "--n-boot", "0") == 0
    pages = list((tmp_path / "out").rglob("*.html"))
    assert len(pages) > 10
    for page in pages:
        assert 'id="synthetic-banner"' in page.read_text(), page
    assert "SYNTHETIC" in (tmp_path / "out" / "tables" / "tables.md").read_text()
    index = (tmp_path / "out" / "index.html").read_text()                    # build_run stored no claims
    assert "none: the store holds no claim annotations" in index and "none: the store holds no lineage edges" in index


def test_fail_factor_prices_a_failed_attempt_in_dgm(report: Path, tmp_path: Path, capsys) -> None:
    """--fail-factor 2: the harmed cell (base pass at 0.43 ms, skill fail, eager 0.9 ms) reads ΔGM 0.43 / 1.8 − 1 =
    −0.761 instead of −0.522; below 1 a fail would beat a pass at eager speed, so it is refused."""
    run = report.parent / "run"
    assert render(run, tmp_path / "out", "--n-boot", "0", "--lineage-n-boot", "0", "--no-trial-pages",
                  "--fail-factor", "2") == 0
    paired = tables_of(tmp_path / "out" / "index.html")["paired_by_model_direction"]
    assert paired[(MODEL, "tirx2cutedsl")]["ΔGM"].startswith("-0.761")
    assert render(run, tmp_path / "out2", "--fail-factor", "0.5") == 2
    assert "--fail-factor must be ≥ 1" in capsys.readouterr().err


def test_the_five_line_summary_counts_by_hand(report: Path) -> None:
    """build_report_run's 18 planned trials (test_export.build_run's plan, plus chain0 of the second problem at h0
    pass and h1 fail): completed 8 + those 2; skill-conditioned attempts and chain hops beyond h0 are 6 skill arms
    and 4 hops, of which the first problem's two skill arms and the second chain's h1 ran, and one was skipped."""
    from mkb_ray.analysis.report.summary import run_summary
    from mkb_ray.store import RunStore

    with RunStore(report.parent / "run", readonly=True) as store:
        lines = run_summary(store, report / "index.html")
    assert len(lines) == 5
    assert lines[0] == "trials: 18 planned; 10 completed, 1 error, 1 infra_error, 5 planned, 1 skipped"
    assert "chain h0 2 pass; chain h1 1 fail;" in lines[1] and "solo_cutedsl 1 pass2x/2 pass;" in lines[1]
    assert lines[2].startswith("skills: a non-empty SKILL.md from 10 of 10 completed attempts; handed on to 3 of "
                               "10 skill-conditioned attempts and chain hops (1 skipped")
    # Two closures: solo_tirx's annotated claim and b1 of SKILL_H1 (build_report_run); one edge, b0 copied from a0.
    assert lines[3].startswith("claims: 6 in the stored SKILL.md files, 2 labelled unsupported_closure by offline-v1")
    assert lines[3].endswith("; 1 lineage edge") and lines[4] == f"report: {report / 'index.html'}"


def test_the_real_run_has_no_banner(report: Path) -> None:
    assert not any('id="synthetic-banner"' in p.read_text() for p in report.rglob("*.html"))
    # Nor a planted-vs-recovered section: nothing was planted (tests/test_calibration.py renders one).
    assert 'id="calibration"' not in (report / "index.html").read_text()


def test_chains_only_no_claims_and_missing_artifacts_still_render(tmp_path: Path) -> None:
    run = tmp_path / "run"
    trials = [t for t in make_trials(problems=PROBLEMS[:1], hops=3) if t.kind == "chain_hop"]
    with RunStore(run) as store:
        store.set_meta(json.dumps({"name": "chains-only"}), "f" * 64, synthetic=False)
        record_plan(store, trials)
        store.write_outcomes([make_outcome(t, tier="pass") for t in trials[:2]])
        sha = store.connection.execute("SELECT sha256 FROM artifacts WHERE trial_id = ? AND name = "
                                       "'transcript.jsonl'", (trials[0].trial_id,)).fetchone()[0]
        skill_sha = store.trial(trials[1].trial_id).skill_sha
        store.artifacts.path(sha).unlink()                    # a missing transcript
        store.artifacts.path(skill_sha).unlink()              # a missing SKILL.md
    with sqlite3.connect(run / "store.sqlite") as conn:       # a store made before the claim tables
        for table in ("lineage_runs", "lineage_edges", "annotations", "skills_segmented", "claims"):
            conn.execute(f"DROP TABLE {table}")
    assert render(run, tmp_path / "out") == 0
    index = (tmp_path / "out" / "index.html").read_text()
    assert "none: this run holds no benchmark cell-replicates" in index
    assert "none: the store holds no lineage edges" in index
    first = (tmp_path / "out" / "trials" / (trials[0].trial_id.replace("/", "__") + ".html")).read_text()
    assert "transcript is missing from the artifacts" in first
    second = (tmp_path / "out" / "trials" / (trials[1].trial_id.replace("/", "__") + ".html")).read_text()
    assert "SKILL.md is missing from the artifacts" in second
    planned = (tmp_path / "out" / "trials" / (trials[2].trial_id.replace("/", "__") + ".html")).read_text()
    assert "planned" in planned and "no transcript stored" in planned


def test_cli_refuses_a_missing_store(tmp_path: Path, capsys) -> None:
    assert render(tmp_path / "missing", tmp_path / "out") == 2
    assert "no run store" in capsys.readouterr().err


def _browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _dump(browser: str, page: Path) -> str:
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(_browser() is None, reason="no chromium or chromium-browser on PATH (the headless page-load "
                                               "check needs one; CI installs it)")
def test_a_browser_loads_the_report_and_follows_a_drill_down_link(report: Path, tmp_path: Path) -> None:
    browser = _browser()
    assert browser is not None
    dom = _dump(browser, report / "index.html")
    assert "Paired outcomes" in dom and "SYNTHETIC RUN" not in dom
    shot = tmp_path / "index.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,2400",
                    f"--screenshot={shot}", (report / "index.html").as_uri()], capture_output=True, timeout=120,
                   check=True)
    assert shot.is_file() and shot.stat().st_size > 10_000
    # index -> the list behind the first paired row -> a trial's page, by the links the browser rendered
    listing = re.search(r'href="(lists/paired_by_model_direction-0\.html)"', dom)
    assert listing is not None
    list_dom = _dump(browser, report / listing.group(1))
    trial = re.search(r'href="(\.\./trials/[^"#]+\.html)"', list_dom)
    assert trial is not None
    trial_dom = _dump(browser, (report / "lists" / trial.group(1)).resolve())
    assert 'id="transcript"' in trial_dom and "Submissions and verdicts" in trial_dom
    hostile = _dump(browser, report / "trials" / (H1.replace("/", "__") + ".html"))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in hostile and "<script>alert(1)" not in hostile


def test_long_trial_lists_collapse_to_one_row_per_chain(tmp_path: Path, monkeypatch) -> None:
    from mkb_ray.analysis.report import pages

    monkeypatch.setattr(pages, "COMPACT_AFTER", 1)
    build_report_run(tmp_path / "run")
    assert render(tmp_path / "run", tmp_path / "out", "--n-boot", "0", "--lineage-n-boot", "0") == 0
    index = tmp_path / "out" / "index.html"
    target = next(h for h in hrefs(index) if h.startswith("lists/lineage_headline-")
                  and "hops (coloured by tier)" in (tmp_path / "out" / h).read_text())
    page = tmp_path / "out" / target
    assert CHAIN in page.read_text()
    for href in hrefs(page):
        assert (page.parent / urlsplit(href).path).resolve().is_file(), href


def test_an_inconsistent_lineage_is_reported_not_fatal(tmp_path: Path) -> None:
    build_report_run(tmp_path / "run")
    stray = segment(f"# SKILL\n- {PROBLEMS[0]}: fuse the reduction (cutedsl)\n")[0]   # a benchmark skill's claim
    with RunStore(tmp_path / "run") as store:
        store.claims.write_lineage(CHAIN, MATCHER, ANNOTATOR, 1, [LineageEdgeRecord(
            chain_id=CHAIN, hop=1, parent_id=stray.claim_id, child_id=segment(SKILL_H1)[1].claim_id, edge="copied",
            similarity=0.9, matcher=MATCHER)], first_hop=2)
    assert render(tmp_path / "run", tmp_path / "out", "--n-boot", "0") == 0
    index = (tmp_path / "out" / "index.html").read_text()
    assert "none: the stored lineage could not be read" in index
    assert "Paired outcomes by model × direction" in index          # the rest of the report is there


def test_failure_attribution_shows_the_rule_causes_and_a_stored_judges_agreement(tmp_path: Path) -> None:
    """The fixture's one harmed cell-replicate (MODEL, tirx2cutedsl: base pass, skill fail) gets its rule cause in
    the attribution table (1 harmed, share 1.000); a judge whose stored judgement names the same cause then shows
    1 compared, 1 agreeing, agreement 1.000 (κ: p_e = 1 with one label, and identical labellings count as κ 1 —
    claims.scoring.cohens_kappa's convention)."""
    from mkb_ray.analysis.attribution_judge import PROMPT_SHA256, AttributionJudgement
    from mkb_ray.analysis.attribution_judgements import judgements_path, write_judgements
    from mkb_ray.analysis.cells import cell_replicates, result_rows
    from mkb_ray.analysis.paired import PairingRules, outcome

    build_report_run(tmp_path / "run")
    assert render(tmp_path / "run", tmp_path / "out", "--n-boot", "20", "--lineage-n-boot", "10") == 0
    rules_table = tables_of(tmp_path / "out" / "index.html")["attribution_rules"]
    assert len(rules_table) == 1
    (model, cause), row = next(iter(rules_table.items()))
    assert model == MODEL and row["harmed"] == "1" and row["share of harmed"] == "1.000"
    assert "attribution_agreement" not in tables_of(tmp_path / "out" / "index.html")   # no judge was run

    with RunStore(tmp_path / "run", readonly=True) as store:
        harmed = [cr for cr in cell_replicates(result_rows(store))
                  if cr.resolved and outcome(cr, PairingRules()) == "harm"]
    assert len(harmed) == 1 and harmed[0].direction == "tirx2cutedsl"
    cr = harmed[0]
    judge = "llm:scripted:v1"
    write_judgements(judgements_path(tmp_path / "run", judge), [AttributionJudgement(
        model=cr.model, target=cr.target, problem_id=cr.problem_id, direction=cr.direction, replicate=cr.replicate,
        base_trial=cr.base.trial_id, skill_trial=cr.skill.trial_id, judge=judge, prompt_sha256=PROMPT_SHA256["v1"],
        case_sha256="0" * 64, cause=cause, evidence="the final kernel never compiled", replies=1, rule_cause=cause)])
    assert render(tmp_path / "run", tmp_path / "out2", "--n-boot", "20", "--lineage-n-boot", "10") == 0
    tables = tables_of(tmp_path / "out2" / "index.html")
    agreement = tables["attribution_agreement"][(judge,)]
    assert (agreement["compared"], agreement["agree"], agreement["agreement"]) == ("1", "1", "1.000")
    assert agreement["Cohen's κ"] == "1.000"
    confusion = tables["attribution_confusion"][(judge, cause)]
    assert confusion[cause.replace("_", " ")] == "1" and confusion["n"] == "1"
    assert (tmp_path / "out2" / "tables" / "attribution_agreement.csv").is_file()


def test_paired_pages_put_base_and_skill_side_by_side_with_the_skill_handed_over(report: Path) -> None:
    """Issue 28: a page per resolved cell-replicate and per chain hop after the first, reachable from the index
    (pairs.html) and from every list row; every link on them resolves."""
    index = (report / "pairs.html").read_text()
    assert "Cell-replicates (2)" in index and "Chain hops (4)" in index    # MODEL's first problem; 2 chains × h1, h2
    p0 = f"{MODEL}/{PROBLEMS[0]}/r0"
    page = report / "pairs" / f"{MODEL}__gpu__{PROBLEMS[0]}__cutedsl2tirx__r0.html".replace("/", "__")
    text = page.read_text()
    # The source solo_cutedsl's SKILL.md was handed over; its annotated claim is coloured by its category.
    assert "SKILL.md handed over" in text and f"{p0}/solo_cutedsl" in text
    assert 'data-category="verified_reformulation"' in text
    # The base (solo_tirx, fail) and the skill attempt (pass2x) side by side; the pair helped.
    assert text.index('id="base"') < text.index(f"{p0}/solo_tirx") < text.index('id="skill-conditioned"') \
        < text.index(f"{p0}/cutedsl2tirx_skill")
    assert '<strong id="outcome">help</strong>' in text and "unplaced against another replicate" in text
    # The chain hop h1 beside h0: both SKILL.md files coloured, the copied edge with both claims' texts.
    hop = (report / "hops" / f"{CHAIN}__h1.html".replace("/", "__")).read_text()
    assert "Received: hop 0" in hop and "Written: hop 1" in hop and "<td>copied</td>" in hop
    assert hop.count("Fusing the reduction into one kernel pass halves the memory traffic here.") >= 3
    assert 'class="add"' in hop and "Nothing will ever beat eager PyTorch" in hop
    lists = [p for p in (report / "lists").glob("paired_by_model_direction-*.html")]
    assert any("../pairs/" in p.read_text() for p in lists)
    for html_page in [page, report / "pairs.html", report / "hops" / f"{CHAIN}__h1.html".replace("/", "__")]:
        for href in hrefs(html_page):
            target = href.split("#")[0]
            assert not target or (html_page.parent / target).resolve().is_file(), (html_page.name, href)


@pytest.mark.skipif(_browser() is None, reason="no chromium or chromium-browser on PATH (the headless page-load "
                                               "check needs one; CI installs it)")
def test_a_browser_renders_the_paired_page(report: Path, tmp_path: Path) -> None:
    browser = _browser()
    assert browser is not None
    page = report / "pairs" / f"{MODEL}__gpu__{PROBLEMS[0]}__cutedsl2tirx__r0.html".replace("/", "__")
    dom = _dump(browser, page)
    assert "SKILL.md handed over" in dom and "Skill-conditioned (in tirx)" in dom and "Base (solo in tirx)" in dom
    # Side by side as laid out, not only as written: a copy of the page reports where the browser put the two
    # attempt columns (same row, the skill-conditioned one to the right of the base).
    probe = page.with_name("layout-probe.html")
    probe.write_text(page.read_text().replace("</body>", _LAYOUT_PROBE + "</body>"))
    try:
        laid = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1600",
                               "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    sides = json.loads(re.search(r'data-sides="([^"]*)"', laid.stdout).group(1).replace("&quot;", '"'))
    (base_left, base_top, base_width), (skill_left, skill_top, _) = sides[:2]
    assert abs(base_top - skill_top) <= 2 and skill_left >= base_left + 0.9 * base_width
    # The screenshot shows it: text (dark pixels) in both halves of the window where the columns start.
    shot = tmp_path / "pair.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1600",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    from PIL import Image

    image = Image.open(shot).convert("L")
    top = min(max(base_top, 0), image.height - 400)
    for left in (0, image.width // 2):
        box = image.crop((left, top, left + image.width // 2, top + 400))
        dark = sum(count for value, count in enumerate(box.histogram()) if value < 100)
        assert dark > 500, f"no text drawn in the {'left' if left == 0 else 'right'} column of the screenshot"


_LAYOUT_PROBE = (
    "<script>document.body.setAttribute('data-sides', JSON.stringify([...document.querySelectorAll('.sides > .side')]"
    ".map(e => { const r = e.getBoundingClientRect(); return [Math.round(r.left), Math.round(r.top), "
    "Math.round(r.width)]; })));</script>")


# -- hostile text on every page kind (issue 30) ------------------------------------------------------------------
ATTR = '" onmouseover="x'                # closes a double-quoted attribute and opens a handler, if left unescaped
EVIL = f"{HOSTILE}{ATTR}"
EVIL_MODEL = f"evil{ATTR}<img src=x onerror=alert(1)>"   # no '/': a trial id joins model and problem with it
EVIL_CATEGORY = f"closure{ATTR}{HOSTILE}"


def build_hostile_run(run_dir: Path) -> None:
    """One cell-replicate of EVIL_MODEL (source pass, base fail, skill pass: help) and a three-hop chain, where every
    free text a model or annotator writes holds EVIL: the run's name, each SKILL.md (so each claim), a claim's
    category, each transcript (role, content, tool call, a refused submission, an unreadable line), each final
    kernel and an attempt's error."""
    trials = make_trials(model=EVIL_MODEL, problems=PROBLEMS[:1], hops=3)
    skills = [f"# Notes {EVIL}\n- Fusing the reduction {EVIL} halves the memory traffic here.\n"
              f"- Blocks of 128 threads{ATTR} suit this problem {hop} on sm_90a.\n" for hop in range(3)]
    transcript = "\n".join([
        json.dumps({"event": "message", "role": EVIL, "content": EVIL, "turn": 1, "purpose": EVIL, EVIL: EVIL,
                    "tool_calls": [{"id": EVIL, "name": EVIL, "arguments": EVIL}]}),
        json.dumps({"event": "tool", "name": EVIL, "arguments": {"path": EVIL}, "result": EVIL}),
        json.dumps({"event": "submission", "index": 9, "counted": False, "refused_reason": EVIL}),
        json.dumps({"event": EVIL}), f"not json {EVIL}"]) + "\n"
    outcomes = []
    for t in trials:
        fails = t.arm_name in ("solo_tirx", "tirx2cutedsl_skill") or t.hop == 1
        o = make_outcome(t, tier="fail" if fails else "pass", skill=skills[t.hop or 0])
        o.artifacts.update({"transcript.jsonl": transcript.encode(), "final_kernel.py": f"# {EVIL}\n".encode()})
        outcomes.append(replace(o, error=EVIL) if t.hop == 2 else o)
    claims = [segment(text) for text in skills]
    with RunStore(run_dir) as store:
        store.set_meta(json.dumps({"name": EVIL}), "e" * 64, synthetic=False)
        record_plan(store, trials)
        store.write_outcomes(outcomes)
        for c in claims:
            store.claims.write_segmentation(c[0].skill_sha, "segment-v1", c)
        store.claims.write_annotations([_annotate(c.claim_id, EVIL_CATEGORY if i == 0 else "performance_evidence")
                                 for hop in claims for i, c in enumerate(hop)])
        chain = chain_id_of(EVIL_MODEL, PROBLEMS[0], 0)
        store.claims.write_lineage(chain, MATCHER, ANNOTATOR, 2, [LineageEdgeRecord(
            chain_id=chain, hop=hop, parent_id=claims[hop - 1][i].claim_id, child_id=claims[hop][i].claim_id,
            edge="copied", similarity=1.0, matcher=MATCHER) for hop in (1, 2) for i in (0, 1)])


class _Inert(HTMLParser):
    """A page read back as a browser would: the elements and handler attributes that could run script, the text
    shown and the attribute values."""

    ACTIVE_TAGS = {"script", "img", "iframe", "object", "embed"}

    def __init__(self) -> None:
        super().__init__()
        self.active: list[str] = []
        self.text: list[str] = []
        self.values: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self.ACTIVE_TAGS:
            self.active.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.active.append(f"<{tag} {name}=...>")
            self.values.append(value or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_hostile_text_renders_inert_on_every_page_kind(tmp_path: Path) -> None:
    """Issue 30: a `<script>` or an attribute-breaking quote in anything a model wrote is shown as the text it is on
    every kind of page, never run; each kind is checked to have shown some of it (so the check is not vacuous)."""
    build_hostile_run(tmp_path / "run")
    assert render(tmp_path / "run", tmp_path / "out", "--n-boot", "20", "--lineage-n-boot", "10") == 0
    out = tmp_path / "out"
    shown: dict[str, bool] = {}
    in_attribute = False
    for page in out.rglob("*.html"):
        parsed = _Inert()
        parsed.feed(page.read_text())
        assert parsed.active == [], (page.relative_to(out), parsed.active)
        text = "".join(parsed.text)
        kind = page.name if page.parent == out else page.parent.name
        shown[kind] = shown.get(kind, False) or EVIL in text or EVIL_MODEL in text
        in_attribute = in_attribute or any(EVIL_CATEGORY in v for v in parsed.values)
    assert shown == dict.fromkeys(("index.html", "trials.html", "pairs.html", "trials", "lists", "pairs", "hops"),
                                  True)
    assert in_attribute                                       # a category lands in data-category and title attributes
    trial = _Inert()
    trial.feed((out / "trials" / (file_stem(f"{EVIL_MODEL}/{PROBLEMS[0]}/chain0/h1") + ".html")).read_text())
    assert f"tool call: {EVIL} {EVIL}" in "".join(trial.text)   # a tool call's name and id, as text
