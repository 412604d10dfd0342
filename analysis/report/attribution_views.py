"""The report's failure-attribution tables: the rule pass's causes of harmed cell-replicates per model
(`analysis.attribution.attribution_table`), and, when `mkb attribute` has stored LLM judgements for the run, each
judge's agreement with the rules and its confusion table (`analysis.attribution_judgements.load_judgements`).

Pure apart from reading RUN/attribution/; nothing is re-computed here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from ..attribution import CAUSES, attribute, attribution_table
from ..attribution_judgements import load_judgements
from ..cells import CellReplicate, group_key
from ..paired import PairingRules, outcome
from .views import Column, Members, TableView, integer, number, text


def rule_causes_view(replicates: Sequence[CellReplicate], categories_of: Mapping[str, frozenset[str]],
                     rules: PairingRules, labels: str) -> TableView:
    """Per model and cause: how many harmed cell-replicates the rules attribute to it; each row lists them."""
    frame = attribution_table(replicates, categories_of, by=("model",), rules=rules)
    members = []
    for row in frame.iter_rows(named=True):
        cells = tuple(cr for cr in replicates if cr.resolved and group_key(cr, ("model",)) == (row["model"],)
                      and outcome(cr, rules) == "harm"
                      and attribute(cr, _categories(cr, categories_of), rules) == row["cause"])
        members.append(Members(f"Harmed cell-replicates of model {row['model']} attributed to {row['cause']}",
                               cells))
    columns = [Column("model", text("model"), False), Column("cause", text("cause"), False),
               Column("harmed", integer("n")), Column("share of harmed", number("share"))]
    note = ("Rule-based first pass (analysis/attribution.py): the first rule that holds, in the order "
            f"{', '.join(CAUSES)}; source SKILL.md categories from annotations {labels}. "
            "docs/metrics.md, 'Failure attribution'.")
    return TableView("attribution_rules", "Why skills harmed: rule-based causes", frame, columns, members, note)


def _categories(cr: CellReplicate, categories_of: Mapping[str, frozenset[str]]):
    sha = cr.source.skill_sha if cr.source is not None else None
    return categories_of.get(sha) if sha else None


def judge_views(run_dir: Path) -> list[TableView]:
    """Agreement and confusion of every stored LLM judge with the rule pass; [] when none was run."""
    tables = load_judgements(run_dir)
    if tables.empty:
        return []
    agreement = [Column("judge", text("judge"), False), Column("judgements", integer("n_records")),
                 Column("compared", integer("n")), Column("agree", integer("n_agree")),
                 Column("agreement", number("agreement")), Column("Cohen's κ", number("kappa")),
                 Column("not judged", integer("n_unjudged"))]
    confusion = [Column("judge", text("judge"), False), Column("rule cause", text("rule_cause"), False),
                 *[Column(cause.replace("_", " "), integer(cause)) for cause in CAUSES], Column("n", integer("n"))]
    note = ("LLM judge over the base and skill attempts' transcripts and the source SKILL.md (`mkb attribute`, "
            "analysis/attribution_judge.py, prompt analysis/prompts/attribute-v1.md) vs the rule pass, on the "
            "harmed cell-replicates both labelled; κ = (p_o − p_e) / (1 − p_e). Rows of the confusion table: the "
            "rules' cause; columns: the judge's.")
    return [TableView("attribution_agreement", "LLM judge vs rules: agreement", tables.summary, agreement,
                      [None] * tables.summary.height, note),
            TableView("attribution_confusion", "LLM judge vs rules: confusion", tables.confusion, confusion,
                      [None] * tables.confusion.height, "")]
