"""Chain metrics (analysis/chains.py) on hand-built chains whose numbers are worked out below."""
from __future__ import annotations

from typing import Optional

import pytest

from mkb_ray.analysis.chains import closure_harm, hop_curve, hop_outcomes
from mkb_ray.analysis.paired import PairingRules
from mkb_ray.analysis.propagation import ClaimNode, HopOutcome

C, W = "unsupported_closure", "workload_census"


def row(kind: str, chain: int, dsl: str, tier: Optional[str], kernel: Optional[float] = None, hop: Optional[int] = None,
        replicate: int = 0, status: str = "completed") -> dict:
    tid = f"m/mlp_norm/p/chain{chain}/" + (f"h{hop}" if kind == "chain_hop" else f"base_{dsl}_r{replicate}")
    return {"trial_id": tid, "model": "m", "problem_id": "mlp_norm/p", "dsl": dsl, "kind": kind, "chain": chain,
            "hop": hop, "replicate": replicate, "status": status, "final_tier": tier, "f_kernel_ms": kernel,
            "target": "gpu", "synthetic": 0}


def test_hop_outcomes_pair_each_hop_with_its_chains_baseline_in_its_dsl():
    rows = [row("chain_base", 0, "cutedsl", "pass", 1.0), row("chain_base", 0, "tirx", "fail"),
            row("chain_base", 0, "tirx", "pass", 0.1, replicate=1),      # replicate 1: not the pairing partner
            row("chain_hop", 0, "cutedsl", "pass", 1.0, hop=0), row("chain_hop", 0, "tirx", "pass", 2.0, hop=1),
            row("chain_hop", 0, "cutedsl", None, hop=2, status="skipped"),
            row("chain_hop", 0, "tirx", None, hop=3, status="planned")]
    out = hop_outcomes(rows)
    assert [(o.hop, o.tier, o.base_tier, o.skill_ms, o.base_ms) for o in out] == [
        (0, "pass", "pass", 1.0, 1.0), (1, "pass", "fail", 2.0, None), (2, None, "pass", None, 1.0)]


def test_hop_curve_by_hand():
    # Hop 1 over three chains: help (pass vs fail), harm (fail vs pass), neutral (equal times) -> 1/3, 1/3.
    # Hop 2: two chains, both help (times 1.0 vs 2.0: ratio 2 > 1.05) -> help 1, harm 0.
    outcomes = [HopOutcome("a", 1, "pass", "fail"), HopOutcome("b", 1, "fail", "pass"),
                HopOutcome("c", 1, "pass", "pass", 1.0, 1.0),
                HopOutcome("a", 2, "pass", "pass", 1.0, 2.0), HopOutcome("b", 2, "pass2x", "pass", 1.0, 2.0)]
    curve = {r["hop"]: r for r in hop_curve(outcomes, PairingRules(noise=0.05), n_boot=200).iter_rows(named=True)}
    assert (curve[1]["n"], curve[1]["help_rate"], curve[1]["harm_rate"]) == (3, pytest.approx(1 / 3),
                                                                              pytest.approx(1 / 3))
    assert (curve[2]["n"], curve[2]["help_rate"], curve[2]["harm_rate"]) == (2, 1.0, 0.0)
    assert curve[1]["harm_lo"] <= 1 / 3 <= curve[1]["harm_hi"]
    assert curve[2]["help_lo"] == curve[2]["help_hi"] == 1.0   # every resample is all help


def test_closure_harm_by_hand():
    # Hops 1 of four chains. The SKILL.md each received (hop 0): chains a, b: half closures (x = 0.5); c, d: none.
    # a, b harmed at hop 1, c harmed, d not: harm rate 1.0 with closures received, 0.5 without.
    # OLS of y on x over (0.5, 1), (0.5, 1), (0, 1), (0, 0): slope = cov / var = 0.125 / 0.0625 = ... worked out:
    # mean x 0.25, mean y 0.75; sum (x - 0.25)(y - 0.75) = 2*(0.25*0.25) + (-0.25*0.25) + (-0.25*-0.75) = 0.25;
    # sum (x - 0.25)^2 = 4 * 0.0625 = 0.25 -> slope 1.0.
    nodes = []
    for chain, cats in (("a", [C, W]), ("b", [C, W]), ("c", [W, W]), ("d", [W])):
        nodes += [ClaimNode(chain, 0, f"{chain}{i}", cat, "plain", "unsupported") for i, cat in enumerate(cats)]
    outcomes = [HopOutcome("a", 1, "fail", "pass"), HopOutcome("b", 1, "fail", "pass"),
                HopOutcome("c", 1, "fail", "pass"), HopOutcome("d", 1, "pass", "pass", 1.0, 1.0),
                HopOutcome("a", 0, "pass", "pass")]   # a first hop: nothing received, left out
    got = closure_harm(nodes, [], outcomes, n_boot=200)
    assert (got["n_hops"], got["n_chains"]) == (4, 4)
    assert (got["harm_rate_some"], got["harm_rate_none"]) == (1.0, 0.5)
    assert got["slope"] == pytest.approx(1.0)
    assert got["slope_lo"] is not None and got["slope_lo"] <= got["slope_hi"]
