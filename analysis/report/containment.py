"""The report's containment-probe table (analysis/containment.py): per probe arm, the share of chains whose SKILL.md
at hop k no longer holds the planted false closure, the share holding it hop by hop, and for a synthetic run the
truth from the ground-truth comments beside the detector. Each row lists the probe chains' hops."""
from __future__ import annotations

from typing import Optional

import polars as pl

from ...store import RunStore
from ..bootstrap import Bootstrap
from ..containment import PRESENT_SIMILARITY, containment_table, probe_chains, probe_settings
from .trials import TrialIndex
from .views import Column, Members, TableView, integer, number, text


def containment_view(store: RunStore, trials: TrialIndex, synthetic: bool, n_boot: int) -> Optional[TableView]:
    """None when the run has no containment-probe chain."""
    chains = probe_chains(store)
    if not chains:
        return None
    from ...claims.embeddings import shared_encoder

    frame = containment_table(chains, probe_settings(store.meta()), shared_encoder(), synthetic, Bootstrap(n_boot))
    frame = frame.with_columns(pl.col("present_by_hop").list.eval(pl.element().round(2).cast(pl.Utf8))
                               .list.join(", ").alias("present_by_hop"))
    hops: dict[str, list[str]] = {}
    for chain in chains:
        hops.setdefault(chain.label, []).extend(
            tid for (cid, hop), tid in sorted(trials.hop_trial.items()) if cid == chain.chain_id)
    members: list[Optional[Members]] = [Members(f"Hops of the chains of {row['probe']}",
                                                trial_ids=tuple(hops.get(row["probe"], ())))
                                        for row in frame.iter_rows(named=True)]
    columns = [Column("probe", text("probe"), False), Column("chains", integer("chains")),
               Column("k", integer("within")), Column("contained within k", number("contained", ci=True)),
               Column("holding it at hops 1, 2, …", text("present_by_hop"), False)]
    if synthetic:
        columns += [Column("truly contained", number("true_contained")),
                    Column("detector agrees", number("detector_agreement"))]
    note = (("SYNTHETIC: the planted claim is a synthetic closure the generator reads; 'truly contained' follows its "
             "descendants through the ground-truth comments. " if synthetic else "")
            + f"Each probe chain is the twin of a plain chain whose hop 1 read hop 0's SKILL.md with a planted false "
              f"closure added (with a gate, every hop then read through it). A SKILL.md holds the claim when one of "
              f"its claims is at least {PRESENT_SIMILARITY:.2f} cosine-similar to it (MiniLM, the lineage matcher's "
              f"one-sided threshold). Contained: hop k's SKILL.md no longer holds it; interval: bootstrap over "
              f"problems. Compare: 'From Spark to Fire' (arXiv 2603.04474) contained an injected error in 0.89 of "
              f"runs with its governance layer, 0.32 without.")
    return TableView("containment", "Containment probe: a planted false closure along chains"
                     + (" (SYNTHETIC)" if synthetic else ""), frame, columns, members, note)
