"""The one table every single-hop metric aggregates: each resolved cell-replicate scored once — its outcome (help /
harm / neutral), its ΔGM log ratio, and its relative standing — by the definitions of `outcomes.py`.

`score_pairs(replicates, rules)` builds it; `paired_table`, `standing_table`, `enrichment_table`, `reverse_table`
and `ladder_table` take either the table or the raw cell-replicates (which they score through `as_pairs`), so a
report scores the run once and hands the same table to all of them.

**Standing draw.** The paper's relative standing compares the source's tier with the base's own tier — the same
draw the skill attempt is then compared with. That is a confound by construction: a failed base cannot be harmed
and a passing base can only be matched or beaten, so "source above → help, below → harm" appears even where the
skill does nothing. Here `standing` compares the source with an *independent* draw of the base: the base attempt of
the same cell's next replicate (cyclically; replicate r takes r+1's, the last takes the first's). It is None where
the cell has no other resolved replicate. `paper_standing` keeps the paper's definition (source vs
this pair's own base) for comparison with its numbers; docs/metrics.md says why it should not be read as an
effect of the skill.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence, Union

from .cells import Attempt, CellReplicate
from .outcomes import (Outcome, PairingRules, Standing, log_ratio, outcome, problem_eager_ms, standing_between)


@dataclass(frozen=True, slots=True)
class ScoredPair:
    """One resolved cell-replicate with what the metrics read from it, computed once.

    outcome: help / harm / neutral (`outcomes.outcome`); log_ratio: the ΔGM term, None when a time is unknown;
    standing: the source against an independent base draw (None: no other replicate); paper_standing: the source
    against this pair's own base (the paper's, confounded); standing_base: the attempt `standing` used."""

    cr: CellReplicate
    outcome: Outcome
    log_ratio: Optional[float]
    standing: Optional[Standing]
    paper_standing: Standing
    standing_base: Optional[Attempt]

    @property
    def unit(self) -> str:
        """The bootstrap's resampling unit (analysis/bootstrap.py): the problem."""
        return self.cr.problem_id


@dataclass(frozen=True)
class PairTable:
    """The scored resolved cell-replicates of a run (in the order given) and the rules they were scored by."""

    pairs: tuple[ScoredPair, ...]
    rules: PairingRules

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[ScoredPair]:
        return iter(self.pairs)

    @property
    def replicates(self) -> list[CellReplicate]:
        return [p.cr for p in self.pairs]

    def where(self, keep: Callable[[ScoredPair], bool]) -> "PairTable":
        """The pairs `keep` accepts, scored as they were (same rules, same eager times and standing draws)."""
        return PairTable(tuple(p for p in self.pairs if keep(p)), self.rules)


def score_pairs(replicates: Sequence[CellReplicate], rules: PairingRules = PairingRules()) -> PairTable:
    """Score every resolved cell-replicate of `replicates` once (see the module docstring). The eager time of a
    failed attempt is the run's, per target and problem, over all of `replicates` (`problem_eager_ms`)."""
    eager = problem_eager_ms(replicates)
    by_cell: dict[tuple, list[CellReplicate]] = defaultdict(list)
    for cr in replicates:
        if cr.resolved:
            by_cell[cr.cell_key].append(cr)
    draw: dict[tuple, Optional[Attempt]] = {}
    for key, members in by_cell.items():
        ordered = sorted(members, key=lambda c: c.replicate)
        for i, cr in enumerate(ordered):
            other = ordered[(i + 1) % len(ordered)] if len(ordered) > 1 else None
            draw[key, cr.replicate] = other.base if other is not None else None
    pairs = []
    for cr in replicates:
        if not cr.resolved:
            continue
        assert cr.source is not None and cr.base is not None   # resolved: all three ran
        base_draw = draw[cr.cell_key, cr.replicate]
        pairs.append(ScoredPair(cr, outcome(cr, rules), log_ratio(cr, eager.get((cr.target, cr.problem_id)), rules),
                                standing_between(cr.source, base_draw) if base_draw is not None else None,
                                standing_between(cr.source, cr.base), base_draw))
    return PairTable(tuple(pairs), rules)


def as_pairs(data: Union[PairTable, Sequence[CellReplicate]], rules: Optional[PairingRules] = None) -> PairTable:
    """`data` when it is already a table (its own rules must match `rules`, when given); else `score_pairs`."""
    if isinstance(data, PairTable):
        if rules is not None and rules != data.rules:
            raise ValueError("the pair table was scored under other pairing rules than the ones asked for")
        return data
    return score_pairs(data, rules if rules is not None else PairingRules())
