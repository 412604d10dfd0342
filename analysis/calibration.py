"""Planted vs recovered: does the analysis recover the rates a synthetic spec plants?

`planted` comes from the spec alone (`mkb_ray.synthetic.planted.planted_rates`: the generator's tier
probabilities and speedup laws, never the run's records); `recovered` and its interval from the run, through the
same functions the report uses — `paired.paired_table` (T, H), `standing.standing_table` (help and harm by relative
standing), `enrichment.enrichment_table` (closure enrichment) and `reverse.reverse_table` (reverse coupling). One
row per metric and group:

    metric                       group                 planted from              recovered from
    T, H                         model, all            help_harm(model)          paired_table by model / overall
    standing_help, standing_harm above, same, below    standing(group)           standing_table overall
    paper_standing_help, _harm   above, same, below    standing(group, "paper")  standing_table, draw="paper"
    closure_enrichment           model, all            enrichment(model)         enrichment_table, generator labels
    reverse_help, reverse_harm   all                   reverse()                 reverse_table, directions pooled
    closure_enrichment_annotated model, all            enrichment(model)         enrichment_table, annotator labels

`closure_enrichment` reads each source SKILL.md's categories from its ground-truth comments (`truth_categories`),
so it checks the paired analysis and the enrichment statistic; the `_annotated` rows read the stored annotations
(`mkb lineage`) and so add the annotator's errors — they are shown, not checked (`checked` false): an annotator
that misses closures or finds them where there are none pulls the recovered enrichment towards 0.

Intervals are simultaneous: each checked row's is a percentile-bootstrap interval at level 1 - (1 - family_level)
/ m for the m checked rows (Bonferroni), so when the analysis is unbiased every planted value lies inside its
interval with probability at least `family_level` (95 % by default). `within_ci` says whether it does. The paper's
number (arXiv 2610.05014) is given where it has one for the row (`paper`; PAPER below).
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence, Union

import polars as pl

from ..store import RunStore
from ..synthetic import SyntheticSpec, parse_skill
from ..synthetic.planted import PlantedRates, planted_rates
from ..synthetic.spec import spec_taxonomy
from .cells import CellReplicate
from .enrichment import enrichment_table
from .paired import PairingRules, paired_table
from .pairs import PairTable, as_pairs
from .reverse import reverse_table
from .standing import STANDINGS, standing_table

ALL = "all"
# The paper's pooled headline rates (arXiv 2610.05014), by (metric, group). Its closure enrichment is a range over
# models (7-17 points for five of six), not one number per row, so it is left out here.
PAPER: dict[tuple[str, str], float] = {
    ("paper_standing_help", "above"): 0.712, ("paper_standing_harm", "above"): 0.081,
    ("paper_standing_help", "below"): 0.106, ("paper_standing_harm", "below"): 0.538,
    ("reverse_harm", ALL): 0.415}
COLUMNS = {"metric": pl.Utf8, "group": pl.Utf8, "paper": pl.Float64, "planted": pl.Float64,
           "recovered": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "within_ci": pl.Boolean,
           "checked": pl.Boolean, "n": pl.Int64, "level": pl.Float64}


def run_spec(meta: Mapping[str, Any]) -> Optional[SyntheticSpec]:
    """The synthetic spec a run was drawn from (its stored config), or None: not synthetic, verdicts from a real
    judge (`judge: real`: nothing is planted) or a config this version cannot read."""
    try:
        config = json.loads(meta.get("config_json") or "{}")
        data = config.get("synthetic") if isinstance(config, dict) else None
        spec = SyntheticSpec.model_validate(data) if data is not None else None
    except ValueError:
        return None
    return spec if spec is not None and spec.judge == "synthetic" else None


def truth_categories(store: RunStore, skill_shas: Sequence[str]) -> dict[str, frozenset[str]]:
    """The generator's own categories of each synthetic SKILL.md, read from its ground-truth comments
    (`parse_skill`); a SKILL.md that is missing or holds no synthetic claims is left out."""
    out = {}
    for sha in skill_shas:
        claims = parse_skill(store.skill_text_of(sha))
        if claims:
            out[sha] = frozenset(c.category for c in claims)
    return out


def calibration_table(replicates: Union[PairTable, Sequence[CellReplicate]], spec: SyntheticSpec,
                      truth: Mapping[str, frozenset[str]],
                      annotated: Optional[Mapping[str, frozenset[str]]] = None,
                      rules: Optional[PairingRules] = None, n_boot: int = 4000, seed: int = 0,
                      family_level: float = 0.95, planted: Optional[PlantedRates] = None) -> pl.DataFrame:
    """Planted vs recovered, one row per metric and group (see the module docstring). `truth` / `annotated`: the
    categories of each source SKILL.md by its sha, from the generator's comments / from the stored annotations
    (None: no annotated rows). `planted`: precomputed rates (default: derived from `spec` for the run's models at
    the noise of its target). Raises ValueError when the run has no resolved cell-replicate, or more than one
    target (the noise allowance, and so the planted rates, depend on it)."""
    pairs = as_pairs(replicates, rules)
    rules = pairs.rules
    resolved = pairs.replicates
    if not resolved:
        raise ValueError("no resolved cell-replicate to recover anything from")
    targets = sorted({cr.target for cr in resolved})
    if len(targets) != 1:
        raise ValueError(f"a calibration needs one target, this run has {targets}")
    models = sorted({cr.model for cr in resolved})
    if planted is None:
        planted = planted_rates(spec, models, rules.margin(targets[0], True))  # a synthetic run's margin
    closure = spec_taxonomy(spec.taxonomy).closure_category

    checked_rows = 2 * (len(models) + 1) + 2 * 2 * len(STANDINGS) + (len(models) + 1) + 2
    level = 1 - (1 - family_level) / checked_rows
    common = dict(n_boot=n_boot, seed=seed, level=level)
    rows: list[dict[str, Any]] = []

    def add(metric: str, group: str, value: float, recovered: Optional[float], lo: Optional[float],
            hi: Optional[float], n: int, checked: bool = True) -> None:
        inside = None if lo is None or hi is None else bool(lo <= value <= hi)
        rows.append({"metric": metric, "group": group, "paper": PAPER.get((metric, group)), "planted": value,
                     "recovered": recovered, "ci_low": lo, "ci_high": hi, "within_ci": inside, "checked": checked,
                     "n": n, "level": level})

    by_model = {r["model"]: r for r in paired_table(pairs, by=("model",), **common).iter_rows(named=True)}
    overall = paired_table(pairs, by=(), **common).row(0, named=True)
    for metric, index in (("T", 0), ("H", 1)):
        for model in models:
            r = by_model[model]
            add(metric, model, planted.help_harm(model)[index], r[metric], r[f"{metric}_lo"], r[f"{metric}_hi"],
                r["n_pairs"])
        add(metric, ALL, planted.help_harm()[index], overall[metric], overall[f"{metric}_lo"],
            overall[f"{metric}_hi"], overall["n_pairs"])

    for draw, prefix in (("independent", ""), ("paper", "paper_")):
        standing_rows = {r["standing"]: r for r in standing_table(pairs, by=(), draw=draw, **common)
                         .iter_rows(named=True)}
        for outcome, index in (("help", 1), ("harm", 2)):
            for group in STANDINGS:
                r = standing_rows[group]
                add(f"{prefix}standing_{outcome}", group, planted.standing(group, draw=draw)[index],
                    r[f"{outcome}_rate"], r[f"{outcome}_rate_lo"], r[f"{outcome}_rate_hi"], r["n"])

    def enrichment_rows(metric: str, categories_of: Mapping[str, frozenset[str]], checked: bool) -> None:
        parts = [enrichment_table(pairs, categories_of, [closure], by=("model",), **common),
                 enrichment_table(pairs, categories_of, [closure], by=(), **common)
                 .with_columns(pl.lit(ALL).alias("model"))]
        found = {r["model"]: r for part in parts for r in part.iter_rows(named=True)}
        for group in [*models, ALL]:
            r = found.get(group)
            value = planted.enrichment(None if group == ALL else group)[2]
            if r is None:
                add(metric, group, value, None, None, None, 0, checked)
            else:
                add(metric, group, value, r["enrichment"], r["enrichment_lo"], r["enrichment_hi"],
                    r["n_help"] + r["n_harm"], checked)

    enrichment_rows("closure_enrichment", truth, True)

    rev = reverse_table(pairs, by=(), pool_directions=True, **common).row(0, named=True)
    planted_rev = planted.reverse()
    for outcome in ("help", "harm"):
        add(f"reverse_{outcome}", ALL, planted_rev[outcome], rev[f"share_{outcome}"], rev[f"share_{outcome}_lo"],
            rev[f"share_{outcome}_hi"], rev["n_given"])
    assert sum(r["checked"] for r in rows) == checked_rows, "the Bonferroni count is out of date"

    if annotated is not None:
        enrichment_rows("closure_enrichment_annotated", annotated, False)
    return pl.DataFrame(rows, schema=COLUMNS)
