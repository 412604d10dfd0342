"""The package's layers, read from the source (function-level imports included, since a lazy import is still a
dependency): the data model at the bottom imports nothing of ours, no package imports one that imports it back,
lower layers never reach up into the scheduler or the command line, and the judging worker stays self-contained."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from conftest import REPO

# Where each installed package's source lives (actors/ and analysis/ install as mkb_ray.actors / mkb_ray.analysis).
SOURCE_ROOTS = {"mkb_ray": REPO / "mkb_ray", "mkb_ray.actors": REPO / "actors",
                "mkb_ray.analysis": REPO / "analysis"}


def _modules() -> dict[str, Path]:
    modules = {}
    for package, root in SOURCE_ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([package, *parts])] = path
    return modules


MODULES = _modules()


def _room(module: str) -> str:
    """The layer a module belongs to: its first component under mkb_ray. The import-light package root and its
    lazy-export helper (`mkb_ray._lazy`) are everyone's: 'mkb_ray'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "_lazy" else "mkb_ray"


def _imports(module: str, path: Path) -> set[str]:
    """Project modules that `module` imports, anywhere in its body, resolved to absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name in MODULES and name != module}


def _room_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for module, path in MODULES.items():
        room = _room(module)
        graph.add_node(room)
        for target in _imports(module, path):
            if _room(target) not in (room, "mkb_ray"):  # the import-light package root is everyone's
                graph.add_edge(room, _room(target), example=f"{module} imports {target}")
    return graph


GRAPH = _room_graph()


def _reaches(room: str) -> set[str]:
    return set(GRAPH.successors(room)) if room in GRAPH else set()


def test_the_expected_rooms_exist():
    rooms = {_room(m) for m in MODULES}
    assert {"records", "problems", "judge", "checker", "kernel_runner", "llm", "models", "agents", "claims",
            "lineage", "synthetic", "store", "campaign", "cli", "actors", "analysis"} <= rooms, rooms


def test_records_import_nothing_of_the_project():
    assert _reaches("records") == set(), [GRAPH.edges["records", r]["example"] for r in _reaches("records")]


@pytest.mark.parametrize("room", ["store", "synthetic", "claims", "lineage", "agents", "records", "llm", "models",
                                  "judge", "checker", "kernel_runner", "problems"])
def test_lower_layers_do_not_reach_up_into_campaign_or_cli(room):
    upward = _reaches(room) & {"campaign", "cli"}
    assert not upward, [GRAPH.edges[room, r]["example"] for r in upward]


def test_no_package_imports_one_that_imports_it_back():
    cycles = list(nx.simple_cycles(GRAPH))
    described = [[GRAPH.edges[a, b]["example"] for a, b in zip(c, c[1:] + c[:1])] for c in cycles]
    assert not cycles, described


def test_no_module_imports_one_that_imports_it_back():
    """Within packages too, through any chain of imports (type-only and function-level ones included: each is a
    dependency a reader has to hold in mind)."""
    graph = nx.DiGraph((module, target) for module, path in MODULES.items() for target in _imports(module, path))
    cycles = sorted(nx.simple_cycles(graph), key=len)
    assert not cycles, cycles[:5]


def test_only_the_command_line_imports_the_command_line():
    users = sorted(room for room in GRAPH.predecessors("cli")) if "cli" in GRAPH else []
    assert users == [], users


# The kernel runner's modules the checker reads, each for one agreement between the two processes (their source is
# read-only to the sandbox, so importing them gives the kernel nothing).
AGREED_WITH_THE_CHECKER = {
    "mkb_ray.kernel_runner.exchange",    # the wire format of the shared buffers
    "mkb_ray.kernel_runner.evidence",    # one classification of a CPU profile: the candidate's calls and the
                                         # reference's yardstick are only comparable if read the same way
    "mkb_ray.kernel_runner.draw_clock",  # the L2 flush size, so the checker's own clock flushes what the device's does
}


def test_the_judging_processes_import_only_themselves():
    # They run on bare GPU hosts (standard library, torch, numpy and the DSL only); mkb_ray's own __init__ is
    # import-light by design. The checker may use what both sides must agree on (AGREED_WITH_THE_CHECKER); the
    # kernel runner, which runs next to hostile code, imports nothing of the checker's.
    outside = {t for m, p in MODULES.items() if _room(m) == "checker" for t in _imports(m, p)
               if _room(t) not in ("checker", "mkb_ray") and t not in AGREED_WITH_THE_CHECKER}
    assert not outside, outside
    from_kernel_side = {t for m, p in MODULES.items() if _room(m) == "kernel_runner" for t in _imports(m, p)
                        if _room(t) not in ("kernel_runner", "mkb_ray")}
    assert not from_kernel_side, from_kernel_side


def test_command_line_code_lives_only_in_the_cli_package():
    stray = sorted(m for m in MODULES if m.endswith("_cli") or (m.endswith(".cli") and _room(m) != "cli"))
    assert not stray, stray
    argparse_users = sorted(m for m, p in MODULES.items() if _room(m) != "cli"
                            and "import argparse" in p.read_text(encoding="utf-8"))
    assert not argparse_users, argparse_users


def test_the_analyser_sees_relative_and_lazy_imports():
    # The checks above would pass vacuously if imports were not resolved: pin a few known edges.
    assert GRAPH.has_edge("cli", "campaign") and GRAPH.has_edge("cli", "store")
    assert GRAPH.has_edge("store", "records") and GRAPH.has_edge("judge", "checker")
    assert GRAPH.has_edge("campaign", "agents")  # only through a function-level import
