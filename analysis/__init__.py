"""Analysis of stored records (paired lift, standing, propagation, reports): reads records, never writes them.

Installed as `mkb_ray.analysis`. Public names are imported on first use (matplotlib only for the plots).
- `cells`: the paired units of the benchmark (source, base, skill attempts per cell-replicate) from the store.
- `outcomes`: what one pair says (help / harm / neutral, its ΔGM term, relative standing); `pairs`: every resolved
  pair scored once, the table the single-hop metrics aggregate; `bootstrap`: the one bootstrap (problems as the
  unit) every interval uses.
- `ladder`: MetaKernelBench's R@t ladder, S, lift and coverage (the one implementation; results.json uses it).
- `paired`: T, H and the ΔGM paired lift per group with bootstrap intervals.
- `standing`, `reverse`, `enrichment`: relative standing (and its gaps), reverse-direction coupling, category
  enrichment.
- `attribution`: why a skill harmed (rule-based causes of harmed cell-replicates); `attribution_case` (what the
  LLM judge reads of one), `attribution_judge` (the LLM judge, prompts/attribute-<version>.md),
  `attribution_judgements` (its RUN/attribution/<judge>.jsonl files), `attribution_agreement` (judge vs rules:
  raw agreement, Cohen's κ, confusion table).
- `chains`: each chain hop against its baseline, per-hop help/harm curves, received closures vs harm.
- `calibration`: planted vs recovered — the rates a synthetic spec plants (`mkb_ray.synthetic.planted`) beside
  what the analysis recovers from the run, with simultaneous intervals (a synthetic run's report shows it).
- `results_json`: MetaKernelBench-compatible per-model results.json (`mkb export --results-json`).
- `propagation`: how claims propagate along chains (prevalence, survival, reinforcement vs dilution, inheritance,
  attractor fits, coupling with outcomes, transition rates, the headline table).
- `lineage_plots`: survival curves, prevalence per hop and one chain's lineage graph, as PNG and SVG.
"""
from __future__ import annotations

from mkb_ray._lazy import lazy_exports

_PROPAGATION = ("ClaimNode", "HopOutcome", "Lineage", "PerHop", "AttractorFit", "TransitionRates", "UNANNOTATED",
                "CHAIN_KEYS", "HOP_KEYS", "REINFORCEMENT_OUTCOMES", "TRANSITIONS", "category_of",
                "prevalence", "lineages", "survival", "reinforcement", "parent_fate", "inheritance",
                "fit_attractor", "prevalence_series", "attractors", "hop_effect", "coupling", "parent_transition",
                "transition_rates", "headline_table")
_PLOTS = ("plot_survival", "plot_prevalence", "plot_lineage_graph", "save_figure", "category_colours")

_EXPORTS = {**{n: "mkb_ray.analysis.propagation" for n in _PROPAGATION},
            **{n: "mkb_ray.analysis.lineage_plots" for n in _PLOTS}}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
