"""Why did a skill harm? The rule-based first pass of failure attribution for harmed cell-replicates.

Each harmed cell-replicate (analysis/paired.py) gets one cause, the first of these rules that holds:
1. `measurement_noise` — both attempts passed and the skill's kernel is slower by less than twice the noise band
   (skill_ms / base_ms ≤ (1 + noise)²): a harm the judge's timing barely resolves.
2. `execution_error` — the skill attempt's final kernel did not compile, or compiled but was never correct, while
   the attempt ran to its own end (`finished`).
3. `budget_exhaustion` — the skill attempt ran out of tokens, turns or context (`tokens`, `max_turns`,
   `context_overflow`).
4. `search_truncation` — it stopped on the wall clock or with its submissions spent (`wall_clock`,
   `submissions`) without a passing kernel.
5. `dsl_mismatch_transfer` — the source SKILL.md carries claims about the source DSL (`dsl_specific_detail`) and
   the skill attempt's final kernel did not compile in the target DSL.
6. `unverified_adoption` — the source SKILL.md carries unsupported content (`unsupported_closure`,
   `unsupported_claim` or `unverified_reformulation` claims): the skill most likely steered the attempt by it.
7. `unattributed` — none of the above.
The LLM judge over the two transcripts (`attribution_judge`, `mkb attribute`) is the second pass; its agreement
with this one is `attribution_agreement`.
"""
from __future__ import annotations

from collections import Counter
from typing import Literal, Mapping, Optional, Sequence

import polars as pl

from .cells import CellReplicate, group_key
from .paired import PairingRules, outcome

Cause = Literal["measurement_noise", "execution_error", "budget_exhaustion", "search_truncation",
                "dsl_mismatch_transfer", "unverified_adoption", "unattributed"]
CAUSES: tuple[Cause, ...] = ("measurement_noise", "execution_error", "budget_exhaustion", "search_truncation",
                             "dsl_mismatch_transfer", "unverified_adoption", "unattributed")
UNVERIFIED_CATEGORIES = frozenset({"unsupported_closure", "unsupported_claim", "unverified_reformulation"})
_BUDGET_STOPS = frozenset({"tokens", "max_turns", "context_overflow"})
_SEARCH_STOPS = frozenset({"wall_clock", "submissions"})


def attribute(cr: CellReplicate, source_categories: Optional[frozenset[str]],
              rules: PairingRules = PairingRules()) -> Cause:
    """The cause of one harmed cell-replicate (see the module docstring). `source_categories`: the categories of
    the source SKILL.md's annotated claims (None: not annotated)."""
    skill, base = cr.skill, cr.base
    assert skill is not None and base is not None, "attribute() takes harmed, resolved cell-replicates"
    noise = rules.margin_of(cr)
    if skill.passed and base.passed and skill.kernel_ms and base.kernel_ms \
            and skill.kernel_ms / base.kernel_ms <= (1 + noise) ** 2:
        return "measurement_noise"
    categories = source_categories or frozenset()
    if skill.stop_reason == "finished" and (skill.compiled is False or skill.correct is False):
        return "execution_error"
    if skill.stop_reason in _BUDGET_STOPS:
        return "budget_exhaustion"
    if skill.stop_reason in _SEARCH_STOPS and not skill.passed:
        return "search_truncation"
    if "dsl_specific_detail" in categories and skill.compiled is False:
        return "dsl_mismatch_transfer"
    if categories & UNVERIFIED_CATEGORIES:
        return "unverified_adoption"
    return "unattributed"


def attribution_table(replicates: Sequence[CellReplicate], categories_of: Mapping[str, frozenset[str]],
                      by: Sequence[str] = ("model",), rules: PairingRules = PairingRules()) -> pl.DataFrame:
    """Per group and cause: n (harmed cell-replicates with that cause) and share of the group's harmed ones.
    `categories_of`: source SKILL.md sha → its annotated categories (analysis.enrichment.skill_categories)."""
    by = list(by)
    counts: dict[tuple, Counter[str]] = {}
    for cr in replicates:
        if not cr.resolved or outcome(cr, rules) != "harm":
            continue
        sha = cr.source.skill_sha if cr.source is not None else None
        cause = attribute(cr, categories_of.get(sha) if sha else None, rules)
        counts.setdefault(group_key(cr, by), Counter())[cause] += 1
    rows = []
    for key, c in sorted(counts.items()):
        total = sum(c.values())
        rows.extend({**dict(zip(by, key)), "cause": cause, "n": c[cause], "share": c[cause] / total}
                    for cause in CAUSES if c[cause])
    return pl.DataFrame(rows, schema={**{k: pl.Utf8 for k in by}, "cause": pl.Utf8, "n": pl.Int64,
                                      "share": pl.Float64})
