"""How claims propagate along a chain of SKILL.md hand-offs: pure functions from claim nodes and lineage edges to
polars tables (issue 10). Nothing here reads the store or writes anything.

Inputs. A `ClaimNode` is one claim of one hop's SKILL.md with its annotation (category None: unannotated); edges are
`LineageEdgeRecord`s from a claim at hop k-1 (parent) to a claim at hop k (child). A claim is keyed by (chain, hop,
claim_id): an unchanged SKILL.md repeats its claim ids at the next hop. A chain's hops run from its first to its
last claim's hop; a hop in between without claims counts as a SKILL.md with no claims.

Conventions shared by the metrics.
- "Live" edges are all edge types except `contradicted`: a contradicted child denies its parent, it does not carry it.
- Grouping (`by`): chain-level keys `model`, `start_dsl`, `pattern` ('same' when every hop is in the start DSL,
  else 'alternate'), `variant` ('' for a plain chain; `gate-remove` / `gate-mark` for a verification-gated twin whose
  every hop read its predecessor's SKILL.md through the gate; `probe...` for a containment probe:
  records/intervention.py), and for per-hop metrics also hop-level
  keys `dsl` and `direction` ('<dsl of hop k-1>2<dsl of hop k>', 'solo' at a chain's first hop).
- Confidence intervals: percentile bootstrap over chains (chains resampled with replacement within each chain-level
  group, `n_boot` replicates, numpy's default_rng(seed)); `n_boot=0` gives no intervals (None).
- Shares of claims are pooled within a resample (sum of numerators / sum of denominators); prevalence is the mean
  over chains of each chain's share, so that every chain weighs the same, as in the attractor fit.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
import polars as pl

from mkb_ray.records.claims import EDGE_TYPES, MODALITIES, LineageEdgeRecord

from .bootstrap import Bootstrap, percentile_columns
from .paired import PairingRules, compare

UNANNOTATED = "unannotated"
CHAIN_KEYS: tuple[str, ...] = ("model", "start_dsl", "pattern", "variant")
HOP_KEYS: tuple[str, ...] = ("dsl", "direction")
PASSING_TIERS: frozenset[str] = frozenset({"pass", "pass2x"})
CARRY_EDGES: frozenset[str] = frozenset({"copied", "paraphrased", "strengthened", "merged", "split"})
TRANSITIONS: tuple[str, ...] = ("dropped",) + EDGE_TYPES
_FIXED_POINT_EPS = 1e-9
_MOD_RANK = {m: i for i, m in enumerate(MODALITIES)}


@dataclass(frozen=True, slots=True)
class ClaimNode:
    """One claim of one hop's SKILL.md, as annotated. `start_dsl` is the chain's hop-0 DSL, `dsl` this hop's;
    `variant` the chain's intervention token ('' for a plain chain: records/intervention.chain_variant)."""

    chain_id: str
    hop: int
    claim_id: str
    category: Optional[str]
    modality: Optional[str]
    support: Optional[str]
    model: str = ""
    start_dsl: str = ""
    dsl: str = ""
    variant: str = ""


@dataclass(frozen=True, slots=True)
class HopOutcome:
    """A hop's attempt against its solo baseline: final tiers (None: skipped) and final kernel times (ms)."""

    chain_id: str
    hop: int
    tier: Optional[str]
    base_tier: Optional[str]
    skill_ms: Optional[float] = None
    base_ms: Optional[float] = None
    target: str = ""  # where both were judged (gpu, cpu): the 'faster' margin is the target's measured noise
    synthetic: bool = False  # judged by the synthetic judge


Key = tuple[int, str]  # (hop, claim_id) within one chain


@dataclass
class _Chain:
    chain_id: str
    first_hop: int
    last_hop: int
    nodes: dict[Key, ClaimNode]
    by_hop: dict[int, list[ClaimNode]]
    children: dict[Key, list[LineageEdgeRecord]]
    parents: dict[Key, list[LineageEdgeRecord]]
    keys: dict[str, str]
    _depth: Optional[dict[Key, int]] = None

    @property
    def hops(self) -> range:
        return range(self.first_hop, self.last_hop + 1)

    def hop_keys(self, hop: int) -> dict[str, str]:
        dsl = _hop_dsl(self.by_hop.get(hop, ()))
        direction = "solo" if hop == self.first_hop else f"{_hop_dsl(self.by_hop.get(hop - 1, ()))}2{dsl}"
        return {**self.keys, "dsl": dsl, "direction": direction}

    def live_children(self, key: Key) -> list[ClaimNode]:
        ids = dict.fromkeys(e.child_id for e in self.children.get(key, ()) if e.edge != "contradicted")
        return [self.nodes[(key[0] + 1, c)] for c in ids]

    def depth(self, category: Optional[str]) -> dict[Key, int]:
        """Per claim, how many hops its live descendants (of `category` only, if given) reach below it: dynamic
        programming from the last hop. Cached for category None (every category's survival uses it)."""
        if category is None and self._depth is not None:
            return self._depth
        depth: dict[Key, int] = {}
        for hop in reversed(self.hops):
            for n in self.by_hop.get(hop, ()):
                kids = [c for c in self.live_children((hop, n.claim_id))
                        if category is None or category_of(c) == category]
                depth[(hop, n.claim_id)] = max((depth[(hop + 1, c.claim_id)] + 1 for c in kids), default=0)
        if category is None:
            self._depth = depth
        return depth

    def has_live_parent(self, key: Key) -> bool:
        return any(e.edge != "contradicted" for e in self.parents.get(key, ()))


def _hop_dsl(nodes: Iterable[ClaimNode]) -> str:
    return next((n.dsl for n in nodes if n.dsl), "")


def category_of(node: ClaimNode) -> str:
    """The node's category, `unannotated` for None."""
    return node.category if node.category is not None else UNANNOTATED


class _Indexed(dict):
    """Chains already indexed (chain id -> _Chain): the headline passes one to several metrics."""


def index_chains(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord]) -> dict[str, _Chain]:
    """The chains indexed once: pass the result as `nodes` to several metrics (as `headline_table` does) so they
    share one index and its cached lineage depths."""
    return _index(nodes, edges)


def _index(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord]) -> dict[str, _Chain]:
    if isinstance(nodes, _Indexed):
        return nodes
    per_chain: dict[str, dict[Key, ClaimNode]] = defaultdict(dict)
    for n in nodes:
        table = per_chain[n.chain_id]
        if (n.hop, n.claim_id) in table:
            raise ValueError(f"claim {n.claim_id} appears twice at hop {n.hop} of chain {n.chain_id}")
        table[(n.hop, n.claim_id)] = n
    chains: dict[str, _Chain] = _Indexed()
    for cid in sorted(per_chain):
        table = per_chain[cid]
        by_hop: dict[int, list[ClaimNode]] = defaultdict(list)
        for n in table.values():
            by_hop[n.hop].append(n)
        first, last = min(by_hop), max(by_hop)
        start = by_hop[first][0]
        dsls = {n.dsl for n in table.values() if n.dsl}
        pattern = "" if not dsls else ("same" if dsls <= {start.start_dsl or start.dsl} else "alternate")
        chains[cid] = _Chain(cid, first, last, table, dict(by_hop), defaultdict(list), defaultdict(list),
                             {"model": start.model, "start_dsl": start.start_dsl, "pattern": pattern,
                              "variant": start.variant})
    for e in edges:
        chain = chains.get(e.chain_id)
        parent, child = (e.hop - 1, e.parent_id), (e.hop, e.child_id)
        if chain is None or parent not in chain.nodes or child not in chain.nodes:
            raise ValueError(f"edge {e.parent_id} -> {e.child_id} (chain {e.chain_id}, hop {e.hop}) names a claim "
                             f"that is not among the nodes")
        chain.children[parent].append(e)
        chain.parents[child].append(e)
    return chains


def _check_by(by: Sequence[str], allowed: Sequence[str]) -> list[str]:
    bad = [k for k in by if k not in allowed]
    if bad:
        raise ValueError(f"by: {bad} not among the keys this metric groups by ({', '.join(allowed)})")
    return list(by)


def _partitions(chains: Mapping[str, _Chain], by: Sequence[str]) -> list[tuple[dict[str, str], list[_Chain]]]:
    """Chains split by the chain-level keys among `by` (hop-level keys stay inside each part)."""
    keys = [k for k in by if k in CHAIN_KEYS]
    parts: dict[tuple[str, ...], list[_Chain]] = defaultdict(list)
    for chain in chains.values():
        parts[tuple(chain.keys[k] for k in keys)].append(chain)
    return [(dict(zip(keys, values)), parts[values]) for values in sorted(parts)]


def _weights(n_chains: int, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, chains]: how often each chain is drawn in each resample (analysis/bootstrap.py)."""
    boot = Bootstrap(n_boot, seed)
    return boot.counts(n_chains, boot.rng())


def _percentiles(replicates: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Columnwise percentile interval of bootstrap replicates [n_boot, M] (NaN replicates left out)."""
    return percentile_columns(replicates, level)


def _opt(value: float) -> Optional[float]:
    return None if np.isnan(value) else value


def _ratio(num: float, den: float) -> Optional[float]:
    return num / den if den else None


def _none(values: np.ndarray) -> list[Optional[float]]:
    return [None if np.isnan(v) else float(v) for v in values]


def _aggregate(rows: pl.DataFrame, cell_keys: list[str], ratios: Mapping[str, str], den: str, n_boot: int,
               seed: int, level: float) -> pl.DataFrame:
    """Per cell (values of `cell_keys`): for each `out: num` of `ratios`, sum(num)/sum(den) over the rows, with a
    bootstrap interval over chains (`out_lo`, `out_hi`); also `n_chains` (chains with den > 0)."""
    chain_ids = sorted(set(rows["chain_id"].to_list()))
    chain_pos = {c: i for i, c in enumerate(chain_ids)}
    per = rows.group_by(cell_keys + ["chain_id"]).agg([pl.col(c).sum() for c in {den, *ratios.values()}])
    cells = per.select(cell_keys).unique().sort(cell_keys)
    cell_pos = {tuple(r): i for i, r in enumerate(cells.iter_rows())}
    ci = np.array([chain_pos[c] for c in per["chain_id"].to_list()], dtype=int)
    mi = np.array([cell_pos[tuple(r)] for r in per.select(cell_keys).iter_rows()], dtype=int)

    def matrix(column: str) -> np.ndarray:
        m = np.zeros((len(chain_ids), len(cells)))
        np.add.at(m, (ci, mi), per[column].to_numpy().astype(float))
        return m

    dm = matrix(den)
    out = cells.with_columns(pl.Series("n_chains", (dm > 0).sum(axis=0), dtype=pl.Int64))
    w = _weights(len(chain_ids), n_boot, seed) if n_boot > 0 and chain_ids else None
    with np.errstate(divide="ignore", invalid="ignore"):
        for name, num in ratios.items():
            nm = matrix(num)
            point = nm.sum(axis=0) / dm.sum(axis=0)
            lo = hi = np.full(len(cells), np.nan)
            if w is not None:
                lo, hi = _percentiles((w @ nm) / (w @ dm), level)
            out = out.with_columns(pl.Series(name, _none(point), dtype=pl.Float64),
                                   pl.Series(f"{name}_lo", _none(lo), dtype=pl.Float64),
                                   pl.Series(f"{name}_hi", _none(hi), dtype=pl.Float64))
    return out


def _closure_category() -> str:
    from mkb_ray.claims.taxonomy import load_taxonomy

    return load_taxonomy().closure_category


def _category_list(chains: Mapping[str, _Chain], categories: Optional[Sequence[str]]) -> list[str]:
    seen = {category_of(n) for c in chains.values() for n in c.nodes.values()}
    if categories is None:
        return sorted(seen)
    return list(categories) + sorted(seen - set(categories))


def _empty(schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=dict(schema))


# ---------------------------------------------------------------------------------------------------- prevalence
def prevalence(nodes: Iterable[ClaimNode], categories: Optional[Sequence[str]] = None, by: Sequence[str] = (),
               n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Per (group, hop, category): `share` = mean over chains of the share of the hop's claims in the category
    (chains whose SKILL.md at that hop has claims), `mean_count` = mean over chains of the number of such claims,
    with bootstrap intervals. Categories: `categories` (e.g. the taxonomy's names) plus any others seen, and
    `unannotated` for claims without one."""
    keys = _check_by(by, CHAIN_KEYS + HOP_KEYS)
    chains = _index(nodes, ())
    cats = _category_list(chains, categories)
    parts = []
    for _, members in _partitions(chains, keys):
        rows = []
        for chain in members:
            for hop in chain.hops:
                claims = chain.by_hop.get(hop, [])
                counts = defaultdict(int)
                for n in claims:
                    counts[category_of(n)] += 1
                gk = chain.hop_keys(hop)
                for cat in cats:
                    rows.append({"chain_id": chain.chain_id, **{k: gk[k] for k in keys}, "hop": hop,
                                 "category": cat, "count": counts[cat], "one": 1,
                                 "share": counts[cat] / len(claims) if claims else 0.0, "has": int(bool(claims))})
        if not rows:
            continue
        frame = pl.DataFrame(rows)
        cell = keys + ["hop", "category"]
        shares = _aggregate(frame.with_columns(pl.col("share") * pl.col("has")), cell, {"share": "share"}, "has",
                            n_boot, seed, level)
        counts_ = _aggregate(frame, cell, {"mean_count": "count"}, "one", n_boot, seed, level).drop("n_chains")
        parts.append(shares.join(counts_, on=cell))
    if not parts:
        return _empty({"hop": pl.Int64, "category": pl.Utf8, "n_chains": pl.Int64, "share": pl.Float64})
    order = {c: i for i, c in enumerate(cats)}
    out = pl.concat(parts, how="vertical")
    return out.sort(keys + ["hop", pl.col("category").replace_strict(order, return_dtype=pl.Int64)])


# ------------------------------------------------------------------------------------------------------ survival
@dataclass(frozen=True)
class Lineage:
    """A lineage born at `birth_hop`: it survived `survived_hops` hops; `censored` when still alive at chain end."""

    chain_id: str
    claim_id: str
    birth_hop: int
    survived_hops: int
    censored: bool


def lineages(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord], category: str,
             same_category: bool = False) -> list[Lineage]:
    """Every claim of `category` born at its hop (no parent edge of any type) starts a lineage; it survives t hops
    if some descendant along live edges exists at hop birth + t (of the same category when `same_category`). A
    lineage with a descendant at the chain's last hop is censored there."""
    return _lineages(_index(nodes, edges), category, same_category)


def _lineages(chains: Mapping[str, _Chain], category: str, same_category: bool) -> list[Lineage]:
    out = []
    for chain in chains.values():
        depth = chain.depth(category if same_category else None)
        for hop in chain.hops:
            for n in chain.by_hop.get(hop, ()):
                key = (hop, n.claim_id)
                if category_of(n) == category and not chain.parents.get(key):
                    d = depth[key]
                    out.append(Lineage(chain.chain_id, n.claim_id, hop, d, hop + d == chain.last_hop))
    return out


def lineage_counts(lins: Sequence[Lineage], position: Mapping[str, int], t_max: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kaplan-Meier bookkeeping per chain (row `position[chain_id]`), columns t = 0..t_max: deaths, numbers at risk
    and censorings. A lineage that died after surviving T hops is at risk at t <= T+1 and dies at T+1; one censored
    after T hops is at risk at t <= T; anything past t_max is left out."""
    deaths, risk, cens = (np.zeros((len(position), t_max + 1)) for _ in range(3))
    for lin in lins:
        i, t = position[lin.chain_id], lin.survived_hops
        risk[i, 1:min(t if lin.censored else t + 1, t_max) + 1] += 1
        if lin.censored:
            if t <= t_max:
                cens[i, t] += 1
        elif t + 1 <= t_max:
            deaths[i, t + 1] += 1
    return deaths, risk, cens


def kaplan_meier(deaths: np.ndarray, at_risk: np.ndarray) -> np.ndarray:
    """Kaplan-Meier S(t) along the last axis (t = 1..T); NaN from the first t with nobody at risk."""
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(at_risk > 0, 1.0 - deaths / at_risk, np.nan)
    return np.cumprod(factor, axis=-1)


def survival(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord], category: Optional[str] = None,
             by: Sequence[str] = (), same_category: bool = False, n_boot: int = 1000, seed: int = 0,
             level: float = 0.95) -> pl.DataFrame:
    """Kaplan-Meier share of `category` lineages (see `lineages`) surviving t hops, t = 0.. while any is at risk.

    A lineage that died after surviving T hops is at risk at t <= T+1 and dies at T+1; one censored after T hops is
    at risk at t <= T. `category` defaults to the default taxonomy's closure category. Columns: group keys,
    category, t, n_lineages, n_at_risk, n_died, n_censored (censored at exactly t), survival, survival_lo,
    survival_hi (bootstrap over chains)."""
    keys = _check_by(by, CHAIN_KEYS)
    category = category or _closure_category()
    chains = _index(nodes, edges)
    parts = []
    for fixed, members in _partitions(chains, keys):
        lins = _lineages({c.chain_id: c for c in members}, category, same_category)
        if not lins:
            continue
        t_max = max(lin.survived_hops + (0 if lin.censored else 1) for lin in lins)
        deaths, risk, cens = lineage_counts(lins, {c.chain_id: i for i, c in enumerate(members)}, t_max)
        d, r = deaths.sum(axis=0), risk.sum(axis=0)
        curve = np.concatenate([[1.0], kaplan_meier(d[1:], r[1:])])
        lo = hi = np.full(t_max + 1, np.nan)
        if n_boot > 0:
            w = _weights(len(members), n_boot, seed)
            reps = np.concatenate([np.ones((n_boot, 1)), kaplan_meier(w @ deaths[:, 1:], w @ risk[:, 1:])],
                                  axis=1)
            lo, hi = _percentiles(reps, level)
        ts = [t for t in range(t_max + 1) if t == 0 or r[t] > 0]
        parts.append(pl.DataFrame({
            **{k: [v] * len(ts) for k, v in fixed.items()}, "category": [category] * len(ts), "t": ts,
            "n_lineages": [len(lins)] * len(ts), "n_at_risk": [len(lins) if t == 0 else int(r[t]) for t in ts],
            "n_died": [int(d[t]) for t in ts], "n_censored": [int(cens.sum(axis=0)[t]) for t in ts],
            "survival": [float(curve[t]) for t in ts], "survival_lo": _none(lo[ts]), "survival_hi": _none(hi[ts])},
            schema_overrides={"survival_lo": pl.Float64, "survival_hi": pl.Float64}))
    if not parts:
        return _empty({**{k: pl.Utf8 for k in keys}, "category": pl.Utf8, "t": pl.Int64, "n_lineages": pl.Int64,
                       "n_at_risk": pl.Int64, "n_died": pl.Int64, "n_censored": pl.Int64, "survival": pl.Float64,
                       "survival_lo": pl.Float64, "survival_hi": pl.Float64})
    return pl.concat(parts, how="vertical")


# --------------------------------------------------------------------------------------- reinforcement / dilution
@dataclass(frozen=True)
class PerHop:
    """A metric per hop (`per_hop`) and pooled over hops (`totals`), both per group and category."""

    per_hop: pl.DataFrame
    totals: pl.DataFrame


REINFORCEMENT_OUTCOMES: tuple[str, ...] = ("reinforced", "diluted", "mixed", "neutral")


def parent_fate(children: Sequence[tuple[str, ClaimNode]], parent: ClaimNode) -> dict[str, bool]:
    """The reinforcement/dilution flags of one parent claim from its (edge type, child) pairs at the next hop.

    reinforced: carried (copied/paraphrased/strengthened/merged/split) to a child of equal or stronger modality
    that is still unsupported, or spread to more than one child along live edges. diluted: dropped (no child),
    weakened, contradicted (edge, or a child whose support is contradicted), or a child that is supported.
    `outcome` (one of REINFORCEMENT_OUTCOMES) is mixed when both hold, neutral when neither."""
    rank = _MOD_RANK.get(parent.modality or "")
    live = {c.claim_id: c for e, c in children if e != "contradicted"}
    carried = any(e in CARRY_EDGES and rank is not None and _MOD_RANK.get(c.modality or "", -1) >= rank
                  and c.support == "unsupported" for e, c in children)
    flags = {"dropped": not children, "weakened": any(e == "weakened" for e, _ in children),
             "contradicted": any(e == "contradicted" for e, _ in children)
             or any(c.support == "contradicted" for c in live.values()),
             "supported": any(c.support == "supported" for c in live.values()),
             "carried": carried, "spread": len(live) > 1}
    reinforced = flags["carried"] or flags["spread"]
    diluted = flags["dropped"] or flags["weakened"] or flags["contradicted"] or flags["supported"]
    outcome = ("mixed" if diluted else "reinforced") if reinforced else ("diluted" if diluted else "neutral")
    return {**flags, **{o: outcome == o for o in REINFORCEMENT_OUTCOMES}}


def children_pairs(chain: _Chain, key: Key) -> list[tuple[str, ClaimNode]]:
    """(edge type, child) of the claim `key` = (hop, claim_id) at the next hop: what `parent_fate` reads."""
    return [(e.edge, chain.nodes[(key[0] + 1, e.child_id)]) for e in chain.children.get(key, ())]


def reinforcement(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord],
                  categories: Optional[Sequence[str]] = None, by: Sequence[str] = (), n_boot: int = 1000,
                  seed: int = 0, level: float = 0.95) -> PerHop:
    """For the claims of each category at hop k-1 (k up to the chain's last hop), their fate at hop k (see
    `parent_fate`). Columns: group keys (hop-level keys describe hop k), hop (= k), category, n_parents, n_<flag>
    for every flag, and share_<outcome> with bootstrap intervals for the four outcomes."""
    keys = _check_by(by, CHAIN_KEYS + HOP_KEYS)
    chains = _index(nodes, edges)
    wanted = set(categories) if categories is not None else None
    flag_names = ("dropped", "weakened", "contradicted", "supported", "carried", "spread") + REINFORCEMENT_OUTCOMES
    rows = []
    for chain in chains.values():
        for hop in chain.hops[1:]:
            gk = chain.hop_keys(hop)
            for parent in chain.by_hop.get(hop - 1, ()):
                cat = category_of(parent)
                if wanted is not None and cat not in wanted:
                    continue
                fate = parent_fate(children_pairs(chain, (hop - 1, parent.claim_id)), parent)
                rows.append({"chain_id": chain.chain_id, **{k: gk[k] for k in CHAIN_KEYS + HOP_KEYS}, "hop": hop,
                             "category": cat, "one": 1, **{f: int(fate[f]) for f in flag_names}})
    return _per_hop(rows, keys, flag_names, {f"share_{o}": o for o in REINFORCEMENT_OUTCOMES}, "n_parents",
                    chains, n_boot, seed, level)


def _per_hop(rows: list[dict], keys: list[str], count_cols: Sequence[str], ratios: Mapping[str, str], n_name: str,
             chains: Mapping[str, _Chain], n_boot: int, seed: int, level: float) -> PerHop:
    if not rows:
        schema = {**{k: pl.Utf8 for k in keys}, "hop": pl.Int64, "category": pl.Utf8, n_name: pl.Int64}
        return PerHop(_empty(schema), _empty({k: v for k, v in schema.items() if k != "hop"}))
    frame = pl.DataFrame(rows)
    results = []
    for cell in (keys + ["hop", "category"], keys + ["category"]):
        parts = []
        for _, members in _partitions(chains, keys):
            ids = [c.chain_id for c in members]
            sub = frame.filter(pl.col("chain_id").is_in(ids))
            if sub.is_empty():
                continue
            sums = sub.group_by(cell).agg(pl.col("one").sum().alias(n_name),
                                          *[pl.col(c).sum().alias(f"n_{c}") for c in count_cols])
            parts.append(sums.join(_aggregate(sub, cell, ratios, "one", n_boot, seed, level), on=cell))
        results.append(pl.concat(parts, how="vertical").sort(cell))
    return PerHop(*results)


# ------------------------------------------------------------------------------------------------- inheritance
def inheritance(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord], by: Sequence[str] = (),
                n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> PerHop:
    """Inheritance of unverified content: among hop-k claims whose support is `unsupported` (k after the chain's
    first hop), the share with a parent along a live edge. Per category and for `all` categories together.
    Columns: group keys, hop, category, n_unsupported, n_inherited, share_inherited (+ _lo, _hi)."""
    keys = _check_by(by, CHAIN_KEYS + HOP_KEYS)
    chains = _index(nodes, edges)
    rows = []
    for chain in chains.values():
        for hop in chain.hops[1:]:
            gk = chain.hop_keys(hop)
            for n in chain.by_hop.get(hop, ()):
                if n.support != "unsupported":
                    continue
                inherited = int(chain.has_live_parent((hop, n.claim_id)))
                for cat in (category_of(n), "all"):
                    rows.append({"chain_id": chain.chain_id, **gk, "hop": hop, "category": cat, "one": 1,
                                 "inherited": inherited})
    return _per_hop(rows, keys, ("inherited",), {"share_inherited": "inherited"}, "n_unsupported", chains,
                    n_boot, seed, level)


# --------------------------------------------------------------------------------------------------- attractor
@dataclass(frozen=True)
class AttractorFit:
    """OLS of prevalence_{k+1} = a + b * prevalence_k over all chains' consecutive hop pairs.

    fixed_point = a / (1 - b) (None when |1 - b| is tiny or the fit is undefined), strength = 1 - b (the pull
    towards the fixed point per hop: 1 jumps there at once, 0 never moves). Intervals: bootstrap over chains."""

    n_chains: int
    n_pairs: int
    a: Optional[float]
    b: Optional[float]
    fixed_point: Optional[float]
    strength: Optional[float]
    r2: Optional[float]
    ci: Mapping[str, tuple[Optional[float], Optional[float]]] = field(default_factory=dict)


def _ols(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """a, b, fixed point, r2 from sums [..., (n, sx, sy, sxx, sxy, syy)]; NaN where undefined."""
    n, sx, sy, sxx, sxy, syy = np.moveaxis(s, -1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        vx, vy, cxy = n * sxx - sx * sx, n * syy - sy * sy, n * sxy - sx * sy
        b = np.where(vx > 1e-12 * np.maximum(n * n, 1), cxy / vx, np.nan)
        a = (sy - b * sx) / n
        fp = np.where(np.abs(1 - b) > _FIXED_POINT_EPS, a / (1 - b), np.nan)
        r2 = np.where(vy > 1e-12 * np.maximum(n * n, 1), cxy * cxy / (vx * vy), np.nan)
    return a, b, fp, np.where(np.isnan(b), np.nan, r2)


def fit_attractor(series: Mapping[str, Sequence[Optional[float]]], n_boot: int = 1000, seed: int = 0,
                  level: float = 0.95) -> AttractorFit:
    """Fit from per-chain prevalence series (consecutive hops; None/NaN breaks a pair)."""
    names = sorted(series)
    sums = np.zeros((len(names), 6))
    for i, name in enumerate(names):
        p = np.array([np.nan if v is None else v for v in series[name]], dtype=float)
        x, y = p[:-1], p[1:]
        ok = ~(np.isnan(x) | np.isnan(y))
        x, y = x[ok], y[ok]
        sums[i] = (len(x), x.sum(), y.sum(), (x * x).sum(), (x * y).sum(), (y * y).sum())
    total = sums.sum(axis=0)
    a, b, fp, r2 = (float(v) for v in _ols(total))
    ci: dict[str, tuple[Optional[float], Optional[float]]] = {}
    if n_boot > 0 and names:
        ra, rb, rfp, _ = _ols(_weights(len(names), n_boot, seed) @ sums)
        for key, reps in (("a", ra), ("b", rb), ("fixed_point", rfp), ("strength", 1 - rb)):
            lo, hi = _percentiles(reps[:, None], level)
            ci[key] = (_none(lo)[0], _none(hi)[0])
    # |1 - b| below the tolerance is a slope of 1 within rounding: no fixed point, and no pull towards one.
    strength = None if np.isnan(b) else (0.0 if abs(1 - b) <= _FIXED_POINT_EPS else 1 - b)
    return AttractorFit(int((sums[:, 0] > 0).sum()), int(total[0]), _opt(a), _opt(b), _opt(fp), strength, _opt(r2),
                        ci)


def prevalence_series(nodes: Iterable[ClaimNode], category: str) -> dict[str, list[Optional[float]]]:
    """Per chain, the share of each hop's claims in `category` (None for a hop without claims)."""
    return _series(_index(nodes, ()), category)


def _series(chains: Mapping[str, _Chain], category: str) -> dict[str, list[Optional[float]]]:
    out = {}
    for chain in chains.values():
        values: list[Optional[float]] = []
        for hop in chain.hops:
            claims = chain.by_hop.get(hop, [])
            values.append(sum(category_of(n) == category for n in claims) / len(claims) if claims else None)
        out[chain.chain_id] = values
    return out


def attractors(nodes: Iterable[ClaimNode], categories: Optional[Sequence[str]] = None, by: Sequence[str] = (),
               n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """`fit_attractor` per group and category. Columns: group keys, category, n_chains, n_pairs, a, b,
    fixed_point, strength, r2, and <a|b|fixed_point|strength>_lo/_hi."""
    keys = _check_by(by, CHAIN_KEYS)
    chains = _index(nodes, ())
    rows = []
    for fixed, members in _partitions(chains, keys):
        part = {c.chain_id: c for c in members}
        for cat in _category_list(chains, categories):
            fit = fit_attractor(_series(part, cat), n_boot, seed, level)
            row = {**fixed, "category": cat, "n_chains": fit.n_chains, "n_pairs": fit.n_pairs, "a": fit.a,
                   "b": fit.b, "fixed_point": fit.fixed_point, "strength": fit.strength, "r2": fit.r2}
            for k in ("a", "b", "fixed_point", "strength"):
                row[f"{k}_lo"], row[f"{k}_hi"] = fit.ci.get(k, (None, None))
            rows.append(row)
    schema = {**{k: pl.Utf8 for k in keys}, "category": pl.Utf8, "n_chains": pl.Int64, "n_pairs": pl.Int64,
              **{k: pl.Float64 for k in ("a", "b", "fixed_point", "strength", "r2")},
              **{f"{k}_{s}": pl.Float64 for k in ("a", "b", "fixed_point", "strength") for s in ("lo", "hi")}}
    return pl.DataFrame(rows, schema=schema)


# ---------------------------------------------------------------------------------------------------- coupling
def hop_effect(outcome: HopOutcome, rules: PairingRules = PairingRules()) -> str:
    """help / harm / neutral of a hop against its solo base, by the benchmark's rule (`paired.compare`, at the
    margin `rules` give for the hop's target and kernel times); a skipped hop or base (tier None) is neutral."""
    if outcome.tier is None or outcome.base_tier is None:
        return "neutral"
    return compare(outcome.tier in PASSING_TIERS, outcome.base_tier in PASSING_TIERS, outcome.skill_ms,
                   outcome.base_ms, rules.margin(outcome.target, outcome.synthetic, outcome.skill_ms,
                                                 outcome.base_ms))


def coupling(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord], outcomes: Iterable[HopOutcome],
             category: Optional[str] = None, by: Sequence[str] = (), exposure: str = "inherited",
             rules: PairingRules = PairingRules(),
             n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Help/harm rates of hops (see `hop_effect`) grouped by exposure to `category`: `inherited` — the hop's own
    SKILL.md has a claim of the category with a live parent; `received` — the SKILL.md it was given (hop k-1's) has
    one. `category` defaults to the default taxonomy's closure category. Outcomes of a chain's first hop, and of
    chains without claims, are left out. Columns: group keys, exposed, n_hops, n_help, n_harm, n_neutral,
    help_rate, harm_rate (+ _lo, _hi)."""
    category = category or _closure_category()
    if exposure not in ("inherited", "received"):
        raise ValueError(f"exposure: {exposure!r} is not 'inherited' or 'received'")
    keys = _check_by(by, CHAIN_KEYS + HOP_KEYS)
    chains = _index(nodes, edges)
    rows = []
    for o in outcomes:
        chain = chains.get(o.chain_id)
        if chain is None or o.hop <= chain.first_hop:
            continue
        if exposure == "inherited":
            exposed = any(category_of(n) == category and chain.has_live_parent((o.hop, n.claim_id))
                          for n in chain.by_hop.get(o.hop, ()))
        else:
            exposed = any(category_of(n) == category for n in chain.by_hop.get(o.hop - 1, ()))
        effect = hop_effect(o, rules)
        rows.append({"chain_id": o.chain_id, **chain.hop_keys(o.hop), "exposed": exposed, "one": 1,
                     **{e: int(effect == e) for e in ("help", "harm", "neutral")}})
    if not rows:
        return _empty({**{k: pl.Utf8 for k in keys}, "exposed": pl.Boolean, "n_hops": pl.Int64})
    frame, cell, parts = pl.DataFrame(rows), keys + ["exposed"], []
    for _, members in _partitions(chains, keys):
        sub = frame.filter(pl.col("chain_id").is_in([c.chain_id for c in members]))
        if sub.is_empty():
            continue
        sums = sub.group_by(cell).agg(pl.col("one").sum().alias("n_hops"),
                                      *[pl.col(e).sum().alias(f"n_{e}") for e in ("help", "harm", "neutral")])
        rates = _aggregate(sub, cell, {"help_rate": "help", "harm_rate": "harm"}, "one", n_boot, seed, level)
        parts.append(sums.join(rates, on=cell))
    return pl.concat(parts, how="vertical").sort(cell)


# ------------------------------------------------------------------------------------------------- transitions
@dataclass(frozen=True)
class TransitionRates:
    """What became of each parent claim at the next hop, each parent counted once (compare with the synthetic
    generator's EvolutionRates: a parent takes one transition).

    A parent with no child is `dropped`; one with a `merged` edge counts as merged (so both parents of a merge
    do); else one with a `split` edge as split; else the type of its most similar edge (ties: EDGE_TYPES order).
    `shares` divide by all parents, `shares_unmerged` by the parents not merged (the generator's convention);
    strengthened_given_not_absolute / weakened_given_not_hedged divide by the unmerged parents not already at the
    strongest / weakest modality. `new_claims_per_hop`: mean over (chain, hop after the first) of claims without
    a parent edge."""

    n_parents: int
    counts: Mapping[str, int]
    shares: Mapping[str, Optional[float]]
    shares_unmerged: Mapping[str, Optional[float]]
    strengthened_given_not_absolute: Optional[float]
    weakened_given_not_hedged: Optional[float]
    new_claims_per_hop: Optional[float]
    n_child_hops: int

    def to_frame(self) -> pl.DataFrame:
        """One row per transition: transition, count, share, share_unmerged."""
        return pl.DataFrame({"transition": list(TRANSITIONS), "count": [self.counts[t] for t in TRANSITIONS],
                             "share": [self.shares[t] for t in TRANSITIONS],
                             "share_unmerged": [self.shares_unmerged[t] for t in TRANSITIONS]},
                            schema_overrides={"share": pl.Float64, "share_unmerged": pl.Float64})


def parent_transition(edges: Sequence[LineageEdgeRecord]) -> str:
    """The one transition a parent took, from its edges to the next hop (see TransitionRates)."""
    if not edges:
        return "dropped"
    types = {e.edge for e in edges}
    for special in ("merged", "split"):
        if special in types:
            return special
    return max(edges, key=lambda e: (e.similarity, -EDGE_TYPES.index(e.edge))).edge


def transition_rates(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord],
                     category: Optional[str] = None) -> TransitionRates:
    """Transition rates over every parent claim (of `category` only, if given) at hops before its chain's last."""
    chains = _index(nodes, edges)
    counts = dict.fromkeys(TRANSITIONS, 0)
    not_absolute = not_hedged = strengthened_na = weakened_nh = 0
    new_total = child_hops = 0
    for chain in chains.values():
        for hop in chain.hops[1:]:
            child_hops += 1
            new_total += sum(not chain.parents.get((hop, n.claim_id)) for n in chain.by_hop.get(hop, ()))
            for parent in chain.by_hop.get(hop - 1, ()):
                if category is not None and category_of(parent) != category:
                    continue
                t = parent_transition(chain.children.get((hop - 1, parent.claim_id), []))
                counts[t] += 1
                if t != "merged" and parent.modality in _MOD_RANK:
                    if parent.modality != "absolute":
                        not_absolute += 1
                        strengthened_na += t == "strengthened"
                    if parent.modality != "hedged":
                        not_hedged += 1
                        weakened_nh += t == "weakened"
    n = sum(counts.values())
    unmerged = n - counts["merged"]
    return TransitionRates(
        n, counts, {t: _ratio(c, n) for t, c in counts.items()},
        {t: (None if t == "merged" else _ratio(c, unmerged)) for t, c in counts.items()},
        _ratio(strengthened_na, not_absolute), _ratio(weakened_nh, not_hedged), _ratio(new_total, child_hops),
        child_hops)


# ---------------------------------------------------------------------------------------------------- headline
def headline_table(nodes: Sequence[ClaimNode], edges: Sequence[LineageEdgeRecord],
                   categories: Optional[Sequence[str]] = None, hops: Sequence[int] = (1, 10, 100),
                   survival_t: int = 10) -> pl.DataFrame:
    """Per category: prevalence (mean share over chains) at each of `hops` (a hop past the last one seen becomes
    the last; columns prevalence_h<hop>), survival of its lineages at t = survival_t (or the last t with lineages
    at risk; column survival_t<t>), reinforced and diluted shares of its claims over all hop pairs, and the
    attractor's fixed point and strength. Point estimates only (no bootstrap): the CLI prints it."""
    nodes = _index(nodes, edges)  # once, for all the metrics below
    prev = prevalence(nodes, categories, n_boot=0)
    if prev.is_empty():
        return _empty({"category": pl.Utf8})
    cats = list(dict.fromkeys(prev["category"].to_list()))
    last = int(prev["hop"].max())
    shown = sorted({min(h, last) for h in hops})
    table = pl.DataFrame({"category": cats})
    for h in shown:
        at = prev.filter(pl.col("hop") == h).select("category", pl.col("share").alias(f"prevalence_h{h}"))
        table = table.join(at, on="category", how="left")
    curves = {c: survival(nodes, edges, c, n_boot=0) for c in cats}
    t_last = max((int(df["t"].max()) for df in curves.values() if not df.is_empty()), default=0)
    t_shown = min(survival_t, t_last) if t_last else survival_t
    surv = []
    for c in cats:
        df = curves[c].filter(pl.col("t") <= t_shown)
        surv.append(float(df["survival"][-1]) if not df.is_empty() else None)
    reinf = reinforcement(nodes, edges, cats, n_boot=0).totals.select(
        "category", pl.col("share_reinforced").alias("reinforced"), pl.col("share_diluted").alias("diluted"))
    attr = attractors(nodes, cats, n_boot=0).select("category", "fixed_point", "strength")
    return (table.with_columns(pl.Series(f"survival_t{t_shown}", surv, dtype=pl.Float64))
            .join(reinf, on="category", how="left").join(attr, on="category", how="left"))
