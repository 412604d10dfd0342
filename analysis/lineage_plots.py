"""Figures of claim propagation (issue 10): survival curves, prevalence per hop, one chain's lineage graph.

Each function draws on its own matplotlib Figure (the Agg canvas; pyplot's global state is never touched) and
writes `<stem>.png` and `<stem>.svg`. Output is deterministic: fixed SVG id salt, no dates in metadata, colours
assigned by the order of the categories given.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable, Optional, Sequence

import matplotlib
import polars as pl
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from mkb_ray.records.claims import EDGE_TYPES, LineageEdgeRecord

from .propagation import CHAIN_KEYS, HOP_KEYS, UNANNOTATED, ClaimNode, category_of

# No display on these machines. The figures below draw on the Agg canvas anyway; this only keeps a later pyplot
# import in the same process from picking an interactive backend.
matplotlib.use("Agg")

EDGE_COLOURS: dict[str, str] = {"copied": "#4c72b0", "paraphrased": "#55a868", "strengthened": "#c44e52",
                                "weakened": "#8172b2", "contradicted": "#000000", "merged": "#ccb974",
                                "split": "#64b5cd"}
_DPI = 100
_RC = {"svg.hashsalt": "mkb-ray", "svg.fonttype": "path", "font.size": 9}


def category_colours(categories: Sequence[str]) -> dict[str, str]:
    """A stable colour per category (tab20 in the given order; grey for unannotated)."""
    cmap = matplotlib.colormaps["tab20"]
    named = [c for c in categories if c != UNANNOTATED]
    # tab20's strong shades first, then its light ones: neighbouring categories never get a pair of one hue.
    shades = list(range(0, 20, 2)) + list(range(1, 20, 2))
    colours = {c: matplotlib.colors.to_hex(cmap(shades[i % 20])) for i, c in enumerate(named)}
    colours[UNANNOTATED] = "#bbbbbb"
    return colours


def save_figure(fig: Figure, stem: Path | str) -> list[Path]:
    """Write `<stem>.png` and `<stem>.svg` (parents created); returns both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    paths = [stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".svg")]
    with rc_context(_RC):
        fig.savefig(paths[0], format="png", dpi=_DPI, metadata={"Software": None})
        fig.savefig(paths[1], format="svg", metadata={"Date": None, "Creator": None})
    return paths


def _series_label(row: dict, group_cols: Sequence[str]) -> str:
    extra = ", ".join(str(row[k]) for k in group_cols if row.get(k))
    return f"{row['category']} ({extra})" if extra else str(row["category"])


def _groups(frame: pl.DataFrame) -> tuple[list[str], list[tuple[dict, pl.DataFrame]]]:
    cols = [k for k in CHAIN_KEYS + HOP_KEYS if k in frame.columns]
    keys = cols + ["category"]
    out = []
    for values in frame.select(keys).unique(maintain_order=True).iter_rows(named=True):
        sub = frame.filter(*[pl.col(k) == v for k, v in values.items()])
        out.append((values, sub))
    return cols, out


def plot_survival(curves: pl.DataFrame, stem: Path | str, title: str = "Survival of lineages",
                  categories: Optional[Sequence[str]] = None) -> list[Path]:
    """Kaplan-Meier step curves from `propagation.survival` frames (concatenated: one curve per category and
    group), with the bootstrap band where present."""
    with rc_context(_RC):
        fig = Figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
        cols, groups = _groups(curves)
        colours = category_colours(categories or list(dict.fromkeys(curves["category"].to_list())))
        styles = ("-", "--", ":", "-.")
        for i, (values, sub) in enumerate(groups):
            sub = sub.sort("t")
            colour = colours.get(values["category"], "#333333")
            t, s = sub["t"].to_list(), sub["survival"].to_list()
            ax.step(t, s, where="post", color=colour, linestyle=styles[i % len(styles)],
                    label=f"{_series_label(values, cols)} (n={sub['n_lineages'][0]})")
            if "survival_lo" in sub.columns and sub["survival_lo"].null_count() < len(sub):
                lo = [v if v is not None else s_ for v, s_ in zip(sub["survival_lo"].to_list(), s)]
                hi = [v if v is not None else s_ for v, s_ in zip(sub["survival_hi"].to_list(), s)]
                ax.fill_between(t, lo, hi, step="post", color=colour, alpha=0.15, linewidth=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("hops survived (t)")
        ax.set_ylabel("share of lineages surviving")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(title)
        if groups:
            ax.legend(loc="upper right", fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
    return save_figure(fig, stem)


def plot_prevalence(prev: pl.DataFrame, stem: Path | str, categories: Optional[Sequence[str]] = None,
                    title: str = "Prevalence per hop") -> list[Path]:
    """One line per category (and group) of `propagation.prevalence`: mean share of a hop's claims vs hop,
    with the bootstrap band where present. `categories` restricts and orders the lines."""
    if categories is not None:
        prev = prev.filter(pl.col("category").is_in(list(categories)))
    with rc_context(_RC):
        fig = Figure(figsize=(8, 4.5))
        ax = fig.add_subplot()
        cols, groups = _groups(prev)
        colours = category_colours(categories or list(dict.fromkeys(prev["category"].to_list())))
        for values, sub in groups:
            sub = sub.sort("hop").filter(pl.col("share").is_not_null())
            if sub.is_empty():
                continue
            colour = colours.get(values["category"], "#333333")
            ax.plot(sub["hop"].to_list(), sub["share"].to_list(), color=colour, marker="o" if len(sub) < 30 else None,
                    markersize=3, linewidth=1.2, label=_series_label(values, cols))
            if "share_lo" in sub.columns and sub["share_lo"].null_count() == 0:
                ax.fill_between(sub["hop"].to_list(), sub["share_lo"].to_list(), sub["share_hi"].to_list(),
                                color=colour, alpha=0.12, linewidth=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("hop")
        ax.set_ylabel("share of the hop's claims")
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if groups:
            ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)
        fig.tight_layout()
    return save_figure(fig, stem)


def _focus(nodes: dict[tuple[int, str], ClaimNode], edges: Sequence[LineageEdgeRecord], category: str
           ) -> set[tuple[int, str]]:
    """The claims of `category` with all their ancestors and descendants."""
    down, up = defaultdict(list), defaultdict(list)
    for e in edges:
        down[(e.hop - 1, e.parent_id)].append((e.hop, e.child_id))
        up[(e.hop, e.child_id)].append((e.hop - 1, e.parent_id))
    seeds = [k for k, n in nodes.items() if category_of(n) == category]
    keep = set(seeds)
    for links in (down, up):
        seen, stack = set(seeds), list(seeds)
        while stack:
            for nxt in links.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        keep |= seen
    return keep


def plot_lineage_graph(nodes: Iterable[ClaimNode], edges: Iterable[LineageEdgeRecord], chain_id: str,
                       stem: Path | str, categories: Optional[Sequence[str]] = None,
                       focus_category: Optional[str] = None, max_claims: int = 600) -> list[Path]:
    """One chain's claims (x = hop, dots coloured by category) and lineage edges (coloured by type). When the
    chain has more than `max_claims` claims and `focus_category` is given, only lineages touching that category
    (its claims, their ancestors and descendants) are drawn. Claims of a hop are ordered by their parents' mean
    position (born claims below, by category), which keeps lineages roughly horizontal."""
    table = {(n.hop, n.claim_id): n for n in nodes if n.chain_id == chain_id}
    links = [e for e in edges if e.chain_id == chain_id]
    if not table:
        raise ValueError(f"chain {chain_id!r} has no claims among the nodes")
    focused = focus_category is not None and len(table) > max_claims
    if focused:
        keep = _focus(table, links, focus_category)  # type: ignore[arg-type]
        table = {k: v for k, v in table.items() if k in keep}
        links = [e for e in links if (e.hop - 1, e.parent_id) in keep and (e.hop, e.child_id) in keep]
    cats = list(categories or sorted({category_of(n) for n in table.values()}))
    cats += sorted({category_of(n) for n in table.values()} - set(cats))
    order = {c: i for i, c in enumerate(cats)}
    colours = category_colours(cats)
    parents = defaultdict(list)
    for e in links:
        parents[(e.hop, e.child_id)].append((e.hop - 1, e.parent_id))
    by_hop = defaultdict(list)
    for key in sorted(table):
        by_hop[key[0]].append(key)
    y: dict[tuple[int, str], float] = {}
    for hop in sorted(by_hop):
        def rank(key: tuple[int, str]) -> tuple[int, float, int, str]:
            ys = [y[p] for p in parents.get(key, ()) if p in y]
            cat = order[category_of(table[key])]
            return (0, sum(ys) / len(ys), cat, key[1]) if ys else (1, 0.0, cat, key[1])
        for i, key in enumerate(sorted(by_hop[hop], key=rank)):
            y[key] = float(i)
    hops = sorted(by_hop)
    tallest = max(len(v) for v in by_hop.values())
    big = len(table) > 300
    with rc_context(_RC):
        fig = Figure(figsize=(min(max(6.0, 0.28 * len(hops) + 3), 40.0), min(max(4.0, 0.22 * tallest + 2), 22.0)))
        ax = fig.add_subplot()
        for edge_type in EDGE_TYPES:
            segs = [[(e.hop - 1, y[(e.hop - 1, e.parent_id)]), (e.hop, y[(e.hop, e.child_id)])]
                    for e in links if e.edge == edge_type]
            if segs:
                ax.add_collection(LineCollection(segs, colors=EDGE_COLOURS[edge_type], linewidths=0.6 if big else 1.0,
                                                 alpha=0.7, zorder=1))
        for cat in cats:
            keys = [k for k in sorted(table) if category_of(table[k]) == cat]
            if keys:
                ax.scatter([k[0] for k in keys], [y[k] for k in keys], s=6 if big else 18, color=colours[cat],
                           zorder=2, linewidths=0)
        ax.set_xlim(hops[0] - 0.5, hops[-1] + 0.5)
        ax.set_ylim(-1, tallest)
        ax.invert_yaxis()
        ax.set_yticks([])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("hop")
        shown = f" (lineages touching {focus_category})" if focused else ""
        ax.set_title(f"Claim lineage of chain {chain_id}{shown}")
        used_cats = [c for c in cats if any(category_of(n) == c for n in table.values())]
        used_edges = [t for t in EDGE_TYPES if any(e.edge == t for e in links)]
        handles = ([Line2D([], [], marker="o", linestyle="", color=colours[c], label=c) for c in used_cats]
                   + [Line2D([], [], color=EDGE_COLOURS[t], label=t) for t in used_edges])
        ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)
        fig.tight_layout()
    return save_figure(fig, stem)
