"""The benchmark's tables for the report, each computed by its analysis module (nothing is re-computed here):
paired outcomes (`paired.paired_table`), the MKB ladder (`ladder.group_summary`), relative standing
(`standing.standing_table`), reverse-direction coupling (`reverse.reverse_table`), per-problem ΔGM
(`paired.paired_table` over each problem's cell-replicates) and category enrichment (`enrichment`). Each comes as a
`TableView` whose rows know the cell-replicates they aggregate, selected with the same helpers the metrics use
(`cells.group_key`, and the outcome and standing each pair was scored with once: `pairs.score_pairs`).

Pure: takes the scored pairs and the cell-replicates (and, for enrichment, the categories of each source SKILL.md),
returns views.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Optional, Sequence

import polars as pl

from ..cells import CellReplicate, group_key
from ..enrichment import enrichment_table
from ..ladder import RUNGS, group_summary
from ..noise_margins import MarginClass
from ..pairs import PairTable, ScoredPair
from ..paired import PairingRules, paired_table
from ..reverse import reverse_direction, reverse_table
from ..standing import StandingDraw, standing_of, standing_table
from .views import Column, Members, TableView, integer, interval, num, number, text

ALL = "all"


def _group(replicates: Sequence[CellReplicate], by: Sequence[str], key: tuple, resolved: bool = True
           ) -> list[CellReplicate]:
    return [cr for cr in replicates if (cr.resolved or not resolved) and group_key(cr, by) == key]


def noise_text(rules: PairingRules) -> str:
    """The pairing's noise allowance in words: the fixed one, or the measured one per target."""
    if rules.noise is not None:
        return f"{rules.noise:.0%}"
    classes = "; ".join(f"{target} " + ", ".join(f"{_class_range(body.classes, i)} {c.margin:.0%}"
                                                  for i, c in enumerate(body.classes))
                        for target, body in sorted(rules.margins.targets.items()))
    return (f"the judge's measured timing noise on the target, at the larger margin of the two kernels' time "
            f"classes ({classes}); synthetic attempts the GPU's widest, {rules.margins.margin('gpu'):.1%}")


def _class_range(classes: Sequence[MarginClass], index: int) -> str:
    low = classes[index].min_ms
    if index + 1 < len(classes):
        high = classes[index + 1].min_ms
        return f"below {high:g} ms" if low == 0 else f"{low:g}-{high:g} ms"
    return f"{low:g} ms and over" if low else "any time"


def _label(by: Sequence[str], row: Mapping) -> str:
    return ", ".join(f"{k} {row[k]}" for k in by) or "all cell-replicates"


def paired_view(pairs: PairTable, by: Sequence[str], name: str, title: str, n_boot: int) -> TableView:
    """T, H, neutral and ΔGM per group (`by` () for the overall row)."""
    rules, replicates = pairs.rules, pairs.replicates
    frame = paired_table(pairs, by=by, n_boot=n_boot)
    columns = [Column(k, text(k), numeric=False) for k in by] + [
        Column("cells", integer("n_cells")), Column("pairs", integer("n_pairs")),
        Column("help", integer("n_help")), Column("harm", integer("n_harm")), Column("neutral", integer("n_neutral")),
        Column("T", number("T", ci=True)), Column("H", number("H", ci=True)),
        Column("ΔGM", number("dgm", ci=True, sign=True)), Column("ΔGM cells", integer("n_dgm"))]
    members = [Members(f"{title}: {_label(by, row)}", tuple(_group(replicates, by, tuple(row[k] for k in by))))
               for row in frame.iter_rows(named=True)]
    pass_time = ("a pass at the faster of its kernel and eager" if rules.slow_pass_runs_eager
                 else "a pass at its own kernel time")
    note = (f"Resolved cell-replicates only. Help: the skill passes and the base fails, or both pass and the base is "
            f"slower by more than {noise_text(rules)}; ΔGM: geometric-mean end-to-end speedup of skill over base "
            f"− 1 ({pass_time}, "
            f"a failed attempt at {rules.fail_factor:g}× eager). "
            f"Intervals: bootstrap over problems, {n_boot} resamples.")
    return TableView(name, title, frame, columns, members, note)


def ladder_view(replicates: Sequence[CellReplicate]) -> TableView:
    """MKB's ladder per model × direction (and overall per direction): base, skill and lift for every rung."""
    groups: dict[tuple[str, str], list[CellReplicate]] = defaultdict(list)
    for cr in replicates:
        groups[cr.model, cr.direction].append(cr)
        groups[ALL, cr.direction].append(cr)
    rows, members = [], []
    for (model, direction), crs in sorted(groups.items(), key=lambda kv: (kv[0][0] == ALL, kv[0])):
        s = group_summary(crs)
        row = {"model": model, "direction": direction, "n_cell_replicates": s["n_cell_replicates"],
               "n_resolved": s["n_resolved"], "source_coverage": s["source_coverage"],
               "skill_coverage": s["skill_coverage"]}
        for arm in ("base", "skill", "lift"):
            for rung in RUNGS:
                row[f"{arm}_{rung}"] = None if s[arm] is None else s[arm][rung]
        rows.append(row)
        members.append(Members(f"MKB ladder: model {model}, direction {direction}", tuple(crs)))
    schema = {"model": pl.Utf8, "direction": pl.Utf8, "n_cell_replicates": pl.Int64, "n_resolved": pl.Int64,
              "source_coverage": pl.Float64, "skill_coverage": pl.Float64,
              **{f"{arm}_{rung}": pl.Float64 for arm in ("base", "skill", "lift") for rung in RUNGS}}
    frame = pl.DataFrame(rows, schema=schema)
    columns = [Column("model", text("model"), False), Column("direction", text("direction"), False),
               Column("resolved", lambda r: f"{r['n_resolved']}/{r['n_cell_replicates']}"),
               Column("src cov", number("source_coverage", 2)), Column("skill cov", number("skill_coverage", 2))]
    for arm in ("base", "skill", "lift"):
        for rung in RUNGS:
            digits = 1 if rung == "S" else 2
            columns.append(Column(f"{arm} {rung}", number(f"{arm}_{rung}", digits, sign=arm == "lift")))
    note = ("MetaKernelBench's ladder over resolved cell-replicates: R@t = share passed with speedup ≥ t, "
            "S = 100 × mean R@t; a skipped skill attempt counts as its base; lift = skill − base.")
    return TableView("ladder", "MKB ladder (R@t and S)", frame, columns, members, note)


STANDING_DRAWS: dict[StandingDraw, str] = {"independent": "another replicate's base",
                                           "paper": "own base (paper)"}


def standing_view(pairs: PairTable) -> TableView:
    """Relative standing per model under both groupings: the source against an independent base draw (another
    replicate's base; the default) and against the pair's own base (the paper's, confounded)."""
    parts, members = [], []
    for draw, label in STANDING_DRAWS.items():
        part = standing_table(pairs, by=("model",), draw=draw)
        parts.append(part.with_columns(pl.lit(label).alias("grouping")))
        members += [Members(f"Relative standing ({label}): model {row['model']}, source {row['standing']} base",
                            tuple(p.cr for p in pairs if p.cr.model == row["model"]
                                  and standing_of(p, draw) == row["standing"]))
                    for row in part.iter_rows(named=True)]
    frame = pl.concat(parts, how="vertical")
    columns = [Column("model", text("model"), False), Column("grouping", text("grouping"), False),
               Column("source vs base", text("standing"), False),
               Column("n", integer("n")), Column("help", integer("n_help")), Column("harm", integer("n_harm")),
               Column("help rate", number("help_rate")), Column("harm rate", number("harm_rate")),
               Column("unplaced", integer("n_unplaced"))]
    note = ("The source attempt's final tier against a base's (fail < pass < pass2x); resolved cell-replicates. "
            "'another replicate's base': the base attempt of the cell's next replicate, independent of the one the "
            "skill attempt is compared with (unplaced: cells with one replicate); 'own base (paper)': the pair's "
            "own base, as the paper groups them — that grouping shows 'above helps, below harms' even for a skill "
            "that does nothing (docs/metrics.md, 'Relative standing').")
    return TableView("standing", "Relative standing", frame, columns, members, note)


def reverse_view(pairs: PairTable) -> TableView:
    frame = reverse_table(pairs, by=("model",))
    index = {(p.cr.model, p.cr.target, p.cr.problem_id, p.cr.replicate, p.cr.direction): p for p in pairs}
    members = []
    for row in frame.iter_rows(named=True):
        picked: list[CellReplicate] = []
        for p in pairs:
            cr = p.cr
            if cr.model != row["model"] or cr.direction != row["direction"] or p.outcome != row["given"]:
                continue
            other = index.get((cr.model, cr.target, cr.problem_id, cr.replicate, reverse_direction(cr.direction)))
            if other is not None:
                picked += [cr, other.cr]
        members.append(Members(f"Reverse coupling: model {row['model']}, {row['given']} in {row['direction']} "
                               "and its reverse", tuple(picked)))
    columns = [Column("model", text("model"), False), Column("direction", text("direction"), False),
               Column("given", text("given"), False), Column("n given", integer("n_given")),
               Column("reverse help", number("share_help")), Column("reverse harm", number("share_harm")),
               Column("reverse neutral", number("share_neutral"))]
    note = "Of the cell-replicates with the given outcome in a direction, how their reverse (b2a) came out."
    return TableView("reverse", "Reverse-direction coupling", frame, columns, members, note)


def problem_lift_view(pairs: PairTable, n_boot: int) -> TableView:
    """ΔGM per problem and direction: `paired_table` over each problem's scored pairs."""
    parts, members = [], []
    by_problem: dict[str, list[ScoredPair]] = defaultdict(list)
    for p in pairs:
        by_problem[p.cr.problem_id].append(p)
    for problem, scored in sorted(by_problem.items()):
        mine = PairTable(tuple(scored), pairs.rules)
        part = paired_table(mine, by=("direction",), n_boot=n_boot)
        if part.is_empty():
            continue
        part = part.select("direction", "n_cells", "n_pairs", "n_dgm", "dgm", "dgm_lo", "dgm_hi")
        parts.append(part.with_columns(pl.lit(problem).alias("problem_id")).select("problem_id", pl.all().exclude(
            "problem_id")))
        members += [Members(f"Per-problem ΔGM: {problem}, {d}", tuple(p.cr for p in mine if p.cr.direction == d))
                    for d in part["direction"].to_list()]
    frame = (pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema={
        "problem_id": pl.Utf8, "direction": pl.Utf8, "n_cells": pl.Int64, "n_pairs": pl.Int64, "n_dgm": pl.Int64,
        "dgm": pl.Float64, "dgm_lo": pl.Float64, "dgm_hi": pl.Float64}))
    columns = [Column("problem", text("problem_id"), False), Column("direction", text("direction"), False),
               Column("cells", integer("n_cells")), Column("pairs", integer("n_pairs")),
               Column("ΔGM", number("dgm", ci=True, sign=True))]
    return TableView("problem_lift", "Per-problem lift (ΔGM)", frame, columns, members,
                     "ΔGM paired lift of each problem's resolved cell-replicates, per direction.")


def enrichment_view(pairs: PairTable, categories_of: Mapping[str, frozenset[str]], categories: Sequence[str],
                    n_boot: int, labels: str) -> TableView:
    """Presence of each category among helped vs harmed cell-replicates' source SKILL.md, per model."""
    frame = enrichment_table(pairs, categories_of, categories, by=("model",), n_boot=n_boot)
    members = []
    for row in frame.iter_rows(named=True):
        sided = tuple(p.cr for p in pairs if p.cr.model == row["model"] and p.cr.source is not None
                      and p.cr.source.skill_sha in categories_of and p.outcome != "neutral")
        members.append(Members(f"Enrichment: model {row['model']}, category {row['category']} (helped and harmed "
                               "cell-replicates with an annotated source SKILL.md)", sided))
    columns = [Column("model", text("model"), False), Column("category", text("category"), False),
               Column("helped", integer("n_help")), Column("harmed", integer("n_harm")),
               Column("presence | help", number("presence_help")), Column("presence | harm", number("presence_harm")),
               Column("enrichment", number("enrichment", ci=True, sign=True))]
    note = (f"enrichment = presence among harmed − presence among helped (positive: more frequent in harmful "
            f"skills); annotations {labels}.")
    return TableView("enrichment", "Category enrichment", frame, columns, members, note)


def benchmark_views(replicates: Sequence[CellReplicate], pairs: PairTable, n_boot: int) -> list[TableView]:
    """The single-hop tables in report order (enrichment apart: it needs the store's annotations). `pairs`: the
    run's resolved cell-replicates scored once (`pairs.score_pairs`); the ladder also counts unresolved ones."""
    return [paired_view(pairs, ("model", "direction"), "paired_by_model_direction",
                        "Paired outcomes by model × direction", n_boot),
            paired_view(pairs, (), "paired_overall", "Paired outcomes overall", n_boot),
            ladder_view(replicates), standing_view(pairs), reverse_view(pairs), problem_lift_view(pairs, n_boot)]


def source_skill_shas(replicates: Sequence[CellReplicate]) -> set[str]:
    return {cr.source.skill_sha for cr in replicates if cr.source is not None and cr.source.skill_sha}


def chain_view(rows: Sequence[dict], rules: PairingRules, n_boot: int) -> Optional[TableView]:
    """Help and harm of every plain chain's hop against its chain's solo baseline in the hop's DSL, per hop
    (analysis.chains.hop_curve); None when the run has no chain hops. Gated twins and containment probes are left to
    their own tables (lineage.py, containment.py)."""
    from ...records.intervention import chain_variant
    from ..chains import hop_curve, hop_outcomes

    outcomes = hop_outcomes([r for r in rows if r["kind"] != "chain_hop" or not chain_variant(r["arm_name"])])
    if not outcomes:
        return None
    frame = hop_curve(outcomes, rules=rules, n_boot=n_boot)
    columns = [Column("hop", integer("hop")), Column("hops", integer("n")), Column("help", integer("n_help")),
               Column("harm", integer("n_harm")),
               Column("help rate", lambda r: num(r["help_rate"]) + interval(r["help_lo"], r["help_hi"])),
               Column("harm rate", lambda r: num(r["harm_rate"]) + interval(r["harm_lo"], r["harm_hi"]))]
    note = (f"Each hop's final kernel against its chain's first solo baseline in the same DSL; help and harm as in "
            f"the paired outcomes (margin: {noise_text(rules)}); a skipped hop or baseline is neutral. Hop 0 is a solo "
            f"attempt itself. Intervals: bootstrap over chains, {n_boot} resamples.")
    return TableView("chain_hops", "Help and harm per hop", frame, columns, [None] * frame.height, note)


def chain_kinds_view(rows: Sequence[dict], rules: PairingRules, n_boot: int) -> Optional[TableView]:
    """Help and harm per hop for each kind of chain (plain, gated, episodic, probe: analysis.chains.kind_hop_table),
    each against the (twin's) solo baseline; None when the run has only plain chains."""
    from ..chains import kind_hop_table

    frame = kind_hop_table(rows, rules, n_boot)
    if frame.is_empty():
        return None
    columns = [Column("chains", text("chain_kind"), False), Column("hops", text("hops"), False),
               Column("n", integer("n")),
               Column("help rate", lambda r: num(r["help_rate"]) + interval(r["help_lo"], r["help_hi"])),
               Column("harm rate", lambda r: num(r["harm_rate"]) + interval(r["harm_lo"], r["harm_hi"]))]
    note = ("Each kind of chain hop by hop: plain chains hand on the distilled SKILL.md; gate-<mode> twins the same "
            "through the verification gate; episodic twins the previous hop's transcript and verdicts instead; "
            "probe twins carry a planted false closure from hop 1. Every twin pairs with its plain chain's solo "
            f"baselines; hops 3-9 and each later decade pooled. Intervals: bootstrap over problems, {n_boot} "
            "resamples.")
    return TableView("chain_kinds", "Help and harm per hop, by kind of chain", frame, columns,
                     [None] * frame.height, note)


CALIBRATION_LABELS = {
    "T": "T (help rate)", "H": "H (harm rate)",
    "standing_help": "help rate | standing", "standing_harm": "harm rate | standing",
    "paper_standing_help": "help rate | standing (own base, paper)",
    "paper_standing_harm": "harm rate | standing (own base, paper)",
    "closure_enrichment": "closure enrichment (generator's labels)",
    "reverse_help": "reverse helped | helped", "reverse_harm": "reverse harmed | helped",
    "closure_enrichment_annotated": "closure enrichment (annotator's labels; not checked)"}


def calibration_view(frame: pl.DataFrame, n_boot: int) -> TableView:
    """Planted vs recovered (analysis.calibration.calibration_table), one row per metric and group."""
    def within(row: Mapping) -> str:
        if row["within_ci"] is None:
            return "–"
        return ("yes" if row["within_ci"] else "NO") + ("" if row["checked"] else " (not checked)")

    columns = [Column("metric", lambda r: CALIBRATION_LABELS.get(r["metric"], r["metric"]), numeric=False),
               Column("group", text("group"), numeric=False), Column("paper", number("paper")),
               Column("planted", number("planted")),
               Column("recovered", lambda r: num(r["recovered"]) + interval(r["ci_low"], r["ci_high"])),
               Column("planted inside", within, numeric=False), Column("n", integer("n"))]
    checked = frame.filter(pl.col("checked"))
    inside = int(checked["within_ci"].fill_null(False).sum())
    level = f"{checked['level'][0]:.4f}" if checked.height else "–"
    note = (f"SYNTHETIC calibration. planted: derived from the run's synthetic spec alone "
            f"(mkb_ray/synthetic/planted.py), never from its records; recovered: this run's analysis (paired, "
            f"standing, enrichment and reverse tables); paper: arXiv 2610.05014's pooled rate where it gives one "
            f"(its closure enrichment is 7–17 points for five of six models, not one number). Intervals are "
            f"simultaneous over the {checked.height} checked rows (each at level {level}, Bonferroni for 95 % "
            f"jointly; percentile bootstrap, {n_boot} resamples): {inside} of {checked.height} planted values lie "
            f"inside. n: cell-replicates behind the recovered value (helped and harmed ones for enrichment, helped "
            f"ones for reverse). docs/metrics.md, 'Planted-effect calibration'.")
    return TableView("calibration", "Planted vs recovered (SYNTHETIC)", frame, columns, [None] * frame.height, note)
