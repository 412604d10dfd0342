"""Model serving: the pure config builders, process ownership and clean stops (with a stand-in server), and one real
run — SmolLM2 on this CPU under Ray Serve LLM through the ModelServer actor, answered through litellm."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from mkb_ray.actors.model_server import ModelServer
from mkb_ray.models import endpoints, processes
from mkb_ray.models.endpoints import EndpointError, VLLMProcessEndpoint
from mkb_ray.models.loopback import SETUP_HOOK_ENV_VAR, _loopback_address
from mkb_ray.models.roster import get_model
from mkb_ray.models.serve_config import (SESSION_HEADER, SESSION_ROUTER, CpuTuning, GpuShare, api_server_argv,
                                         cpu_list, llm_config_kwargs, openai_app_config, vllm_env)

LOOPBACK_IPS = ("127.0.0.1", "::ffff:127.0.0.1", "::1")


# --- builders (pure: no Ray cluster, no GPU) -------------------------------------------------------------------

def test_cpu_llm_config_carries_the_measured_cpu_workarounds():
    spec = get_model("smollm2")
    kwargs = llm_config_kwargs(spec, "cpu", "/models/smollm2", CpuTuning(omp_threads_bind="0-1"))
    engine = kwargs["engine_kwargs"]
    assert kwargs["accelerator_config"] == {"kind": "cpu"}
    assert kwargs["model_loading_config"] == {"model_id": "smollm2", "model_source": "/models/smollm2"}
    assert engine["dtype"] == "float32" and engine["enforce_eager"] is True
    assert engine["enable_prefix_caching"] is True and engine["max_model_len"] == spec.context_length
    assert engine["enable_auto_tool_choice"] is True and engine["tool_call_parser"] == "hermes"
    assert "tensor_parallel_size" not in engine
    env = kwargs["runtime_env"]["env_vars"]
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and env["VLLM_HOST_IP"] == "127.0.0.1"
    assert env[SETUP_HOOK_ENV_VAR] == "mkb_ray.models.loopback.bind_serve_grpc_to_loopback"
    deployment = kwargs["deployment_config"]
    # The replica itself takes no CPU slot (the engine bundle does), so a 2-CPU Ray still fits an evaluator.
    assert deployment["ray_actor_options"] == {"num_cpus": 0}
    assert deployment["autoscaling_config"] == {"min_replicas": 1, "initial_replicas": 1, "max_replicas": 1,
                                                "target_ongoing_requests": spec.target_ongoing_requests}
    assert deployment["request_router_config"]["request_router_class"] == SESSION_ROUTER


def test_gpu_llm_config_takes_tp_and_autoscaling_from_the_roster():
    spec = get_model("glm-5.3-flash")
    kwargs = llm_config_kwargs(spec, "gpu", spec.hf_repo or "")
    engine = kwargs["engine_kwargs"]
    assert kwargs["accelerator_config"] == {"kind": "gpu"}
    assert engine["tensor_parallel_size"] == spec.tensor_parallel_size == 8
    assert "dtype" not in engine and "enforce_eager" not in engine
    assert engine["tool_call_parser"] == spec.tool_call_parser
    scaling = kwargs["deployment_config"]["autoscaling_config"]
    assert (scaling["min_replicas"], scaling["max_replicas"]) == (spec.min_replicas, spec.max_replicas)
    assert scaling["target_ongoing_requests"] == spec.target_ongoing_requests < 10**6  # the builder default is 1e9
    assert "ray_actor_options" not in kwargs["deployment_config"]
    assert not any(k.startswith("VLLM_CPU") for k in kwargs["runtime_env"]["env_vars"])


def test_ray_serve_llm_accepts_the_built_configs():
    """Ray's own pydantic models validate our kwargs; vLLM's argument split knows every engine key."""
    llm = pytest.importorskip("ray.serve.llm")
    for name, placement in (("smollm2", "cpu"), ("glm-5.3-flash", "gpu")):
        spec = get_model(name)
        config = llm.LLMConfig(**llm_config_kwargs(spec, placement, "/models/x"))
        engine = config.get_engine_config()  # raises "Unknown engine argument" for a misspelt key
        assert engine.tensor_parallel_degree == spec.tensor_parallel_size
        assert engine.placement_bundles[0].get("GPU", 0) == (1 if placement == "gpu" else 0)
        args = llm.LLMServingArgs.model_validate(openai_app_config(spec, placement, "/models/x"))
        assert args.ingress_deployment_config["ray_actor_options"]["num_cpus"] == 0
    cpu_ingress = openai_app_config(get_model("smollm2"), "cpu", "/m")["ingress_deployment_config"]
    assert cpu_ingress["autoscaling_config"]["max_replicas"] == 1


def test_builders_refuse_what_vllm_cannot_serve():
    with pytest.raises(ValueError, match="served through an API"):
        llm_config_kwargs(get_model("gpt-5.6-sol"), "gpu", "x")
    with pytest.raises(ValueError, match="CPU model"):
        llm_config_kwargs(get_model("smollm2"), "gpu", "x")
    with pytest.raises(ValueError, match="nothing to start"):
        ModelServer(get_model("gpt-5.6-sol"))
    with pytest.raises(ValueError, match="Ray Serve LLM only"):
        ModelServer(get_model("glm-5.3-flash"), backend="vllm_subprocess")


def test_smollm2_on_a_gpu_shared_with_the_judge():
    """`mkb serve smollm2 --device cuda` / experiments/gpu-proof.yaml: the CPU-roster model on one GPU in bf16, without
    vLLM's start-up kernel warm-up, its bundle asking for its share of the GPU and vLLM sizing memory to that share."""
    cpu_spec = get_model("smollm2")
    spec = cpu_spec.on_gpu()
    assert (cpu_spec.num_gpus, spec.num_gpus, spec.on_gpu() is spec) == (0, 1, True)
    assert get_model("glm-5.3-flash").on_gpu().num_gpus == 8    # a GPU model keeps its roster placement
    whole = llm_config_kwargs(spec, "gpu", "/models/smollm2")
    engine = whole["engine_kwargs"]
    assert engine["dtype"] == "bfloat16" and engine["enable_prompt_tokens_details"] is True
    assert engine["kernel_config"] == {"enable_flashinfer_autotune": False, "enable_cutedsl_warmup": False}
    assert "gpu_memory_utilization" not in engine and "placement_group_config" not in whole
    half = llm_config_kwargs(spec, "gpu", "/models/smollm2", gpu=GpuShare(0.5))
    assert half["engine_kwargs"]["gpu_memory_utilization"] == 0.45
    assert half["placement_group_config"] == {"bundles": [{"GPU": 0.5}], "strategy": "STRICT_PACK"}
    assert half["runtime_env"]["env_vars"]["VLLM_RAY_PER_WORKER_GPUS"] == "0.5"
    assert "VLLM_RAY_PER_WORKER_GPUS" not in whole["runtime_env"]["env_vars"]
    # The CPU placement ignores a GPU share; a share outside (0, 1] is refused.
    assert "gpu_memory_utilization" not in llm_config_kwargs(cpu_spec, "cpu", "/m", gpu=GpuShare(0.5))["engine_kwargs"]
    with pytest.raises(ValueError, match="gpu_fraction"):
        GpuShare(1.5)
    # The plain vLLM process of the serving benchmark gets the same engine, config groups as JSON.
    argv = " ".join(api_server_argv(spec, "/models/smollm2", 8124, placement="gpu", python="python"))
    for part in ("--dtype bfloat16", "--enable-prompt-tokens-details",
                 '--kernel-config {"enable_flashinfer_autotune": false, "enable_cutedsl_warmup": false}'):
        assert part in argv, part
    assert "--enforce-eager" not in argv


def test_ray_serve_llm_passes_a_gpu_share_on_to_vllm():
    """Ray's own config model keeps our fractional bundle and tells vLLM's workers their share."""
    llm = pytest.importorskip("ray.serve.llm")
    spec = get_model("smollm2").on_gpu()
    config = llm.LLMConfig(**llm_config_kwargs(spec, "gpu", "/models/x", gpu=GpuShare(0.5)))
    engine = config.get_engine_config()   # raises "Unknown engine argument" for a key vLLM does not know
    assert engine.placement_bundles == [{"GPU": 0.5}]
    assert engine.get_runtime_env_with_local_env_vars()["env_vars"]["VLLM_RAY_PER_WORKER_GPUS"] == "0.5"


def test_api_server_argv_serves_the_roster_name_on_loopback():
    argv = api_server_argv(get_model("smollm2"), "/models/smollm2", 8123, python="python")
    assert argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(argv)
    for part in ("--model /models/smollm2", "--served-model-name smollm2", "--host 127.0.0.1", "--port 8123",
                 "--dtype float32", "--enforce-eager", "--enable-prefix-caching", "--enable-auto-tool-choice",
                 "--tool-call-parser hermes", "--tool-strict-level parameter", "--max-model-len 8192"):
        assert part in joined, part
    assert vllm_env("gpu") == {"VLLM_HOST_IP": "127.0.0.1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


def test_cpu_list_and_loopback_addresses():
    assert (cpu_list([0]), cpu_list([1, 0]), cpu_list([0, 1, 2, 5, 7, 8])) == ("0", "0-1", "0-2,5,7-8")
    assert _loopback_address("[::]:0") == "127.0.0.1:0" and _loopback_address("0.0.0.0:9000") == "127.0.0.1:9000"
    assert _loopback_address("10.0.0.5:7") == "10.0.0.5:7"


def test_setup_hook_variable_matches_ray_and_the_hook_patches_the_replica_binder():
    from ray._private import ray_constants
    from ray.serve._private import replica

    from mkb_ray.models.loopback import bind_serve_grpc_to_loopback

    assert SETUP_HOOK_ENV_VAR == ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR
    original = replica.add_port_to_grpc_server
    seen: list[str] = []
    replica.add_port_to_grpc_server = lambda server, address: seen.append(address) or 1
    try:
        bind_serve_grpc_to_loopback()
        bind_serve_grpc_to_loopback()  # idempotent: wrapped once
        replica.add_port_to_grpc_server(object(), "[::]:0")
    finally:
        replica.add_port_to_grpc_server = original
    assert seen == ["127.0.0.1:0"]


# --- process ownership with a stand-in server (seconds, no vLLM) --------------------------------------------------

# Serves GET /v1/models like vLLM and, like vLLM, spawns a child (its "engine") that it takes down on SIGTERM.
# It serves only once the engine says it is ready, after setting up its SIGTERM handling (a stubborn engine that a
# SIGTERM reached before its SIG_IGN was installed would die as an obedient one does, however slow the machine).
FAKE_SERVER = textwrap.dedent("""
    import http.server, json, os, signal, subprocess, sys
    port, model, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if mode == "crash":
        print("boom: no such model", flush=True)
        sys.exit(3)
    engine = subprocess.Popen([sys.executable, "-c", "import signal, time\\n"
                               + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n" if mode == "stubborn" else "")
                               + "print('ready', flush=True)\\n"
                               + "time.sleep(600)"], stdout=subprocess.PIPE)
    if engine.stdout.readline().strip() != b"ready":
        sys.exit("the engine died before it was ready")
    def on_term(signum, frame):
        engine.terminate()
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "stubborn" else on_term)
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": model}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
""")


def test_waiting_for_a_port_to_close_sees_it_close():
    """Ray Serve's proxy process exits a moment after serve.shutdown() returns; the stop waits for its port."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    assert processes.port_open(port) and not processes.wait_port_closed(port, 0.3)
    listener.close()
    assert processes.wait_port_closed(port, 5.0)


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """Make VLLMProcessEndpoint start FAKE_SERVER (mode set by the test) instead of vLLM."""
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_SERVER)
    mode = {"value": "ok"}

    def argv(spec, source, port, placement="cpu", tuning=None, python=sys.executable):
        return [sys.executable, str(script), str(port), spec.name, mode["value"]]

    monkeypatch.setattr(endpoints, "api_server_argv", argv)
    return mode


def _endpoint(tmp_path: Path) -> VLLMProcessEndpoint:
    return VLLMProcessEndpoint(get_model("smollm2"), "cpu", "/unused", processes.free_port(), tmp_path)


def test_subprocess_endpoint_stop_leaves_no_process_and_closes_the_port(fake_vllm, tmp_path):
    endpoint = _endpoint(tmp_path)
    endpoint.start(timeout_s=30)
    pids = endpoint.pids()
    assert len(pids) == 2 and endpoint.status() == (True, "ok")  # the server and its "engine"
    assert processes.port_open(endpoint.port)
    assert endpoint.stop(timeout_s=10) == []  # nothing needed SIGKILL
    assert processes.alive(pids) == [] and not processes.port_open(endpoint.port)


def test_processes_ignoring_sigterm_are_killed_and_reported(fake_vllm, tmp_path):
    fake_vllm["value"] = "stubborn"
    endpoint = _endpoint(tmp_path)
    endpoint.start(timeout_s=30)
    pids = endpoint.pids()
    began = time.monotonic()
    forced = endpoint.stop(timeout_s=2)
    assert sorted(forced) == sorted(pids) and time.monotonic() - began < 15
    assert processes.alive(pids) == []


def test_a_server_that_dies_at_start_reports_its_log(fake_vllm, tmp_path):
    fake_vllm["value"] = "crash"
    with pytest.raises(EndpointError, match="exited with 3 during start-up: boom: no such model"):
        _endpoint(tmp_path).start(timeout_s=30)


def test_the_server_dies_with_its_parent(fake_vllm, tmp_path):
    """A ModelServer that dies without stop() (actor killed) must not orphan vLLM: PR_SET_PDEATHSIG."""
    parent = textwrap.dedent(f"""
        import json, os, sys
        from mkb_ray.models import endpoints
        endpoints.api_server_argv = lambda *a, **k: [sys.executable, {str(tmp_path / 'fake_vllm.py')!r},
                                                     str(a[2]), a[0].name, "ok"]
        from mkb_ray.models.roster import get_model
        endpoint = endpoints.VLLMProcessEndpoint(get_model("smollm2"), "cpu", "/unused", {processes.free_port()},
                                                 __import__("pathlib").Path({str(tmp_path)!r}))
        endpoint.start(30)
        print(json.dumps(endpoint.pids()), flush=True)
        os._exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=60, check=True)
    pids = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(pids) == 2
    assert processes.wait_gone(pids, timeout_s=15) == []


def test_model_server_falls_back_to_a_vllm_process_when_serve_fails(fake_vllm, tmp_path, monkeypatch):
    def serve_fails(self, timeout_s):
        raise EndpointError("Ray Serve LLM could not deploy 'smollm2': DEPLOY_FAILED: test")

    monkeypatch.setattr(endpoints.ServeLLMEndpoint, "start", serve_fails)
    monkeypatch.setattr(endpoints.ServeLLMEndpoint, "stop", lambda self, timeout_s: [])
    monkeypatch.setattr(ModelServer, "_model_source", lambda self: "/unused")
    server = ModelServer(get_model("smollm2"), log_dir=str(tmp_path))
    assert server.stop() == {"stopped": False, "detail": "not running"}
    info = server.start()
    assert info["placement"]["backend"] == "vllm_subprocess" and "DEPLOY_FAILED: test" in info["fallback_reason"]
    assert info["api_base"] == f"http://127.0.0.1:{info['port']}/v1" and server.health()["healthy"]
    assert server.start()["api_base"] == info["api_base"]  # idempotent: no second server
    pids = server.pids()
    report = server.stop()
    assert report["stopped"] and report["still_running"] == [] and not report["port_open"]
    assert processes.alive(pids) == [] and server.health()["healthy"] is False


def test_no_fallback_when_a_backend_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(endpoints.ServeLLMEndpoint, "start",
                        lambda self, timeout_s: (_ for _ in ()).throw(EndpointError("serve down")))
    monkeypatch.setattr(endpoints.ServeLLMEndpoint, "stop", lambda self, timeout_s: [])
    monkeypatch.setattr(ModelServer, "_model_source", lambda self: "/unused")
    with pytest.raises(EndpointError, match="serve down"):
        ModelServer(get_model("smollm2"), backend="ray_serve_llm", log_dir=str(tmp_path)).start()


# --- the real thing: SmolLM2 on this CPU, Ray Serve LLM, litellm ------------------------------------------------

def _listeners(pids: list[int]) -> list[tuple[str, int]]:
    wanted = set(pids)
    return [(c.laddr.ip, c.laddr.port) for c in psutil.net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.pid in wanted]


@pytest.mark.model
@pytest.mark.shared_server("stops")
def test_smollm2_served_on_cpu_answers_through_litellm_and_stops_clean(serving_ray, smollm2_server):
    """On the server the real-model tests share (tests/shared_serving.py): the last of them, so the server it checks
    and stops is the one tests/test_model_restart.py restarted (when that ran), and a restarted server must stop as
    clean as a first one."""
    ray, server, info = serving_ray, smollm2_server.handle, smollm2_server.info
    try:
        assert info["placement"] == {"kind": "cpu", "backend": "ray_serve_llm", "num_gpus": 0,
                                     "tensor_parallel_size": 1, "min_replicas": 1, "max_replicas": 1}, \
            info.get("fallback_reason")
        assert info["api_base"] == f"http://127.0.0.1:{info['port']}/smollm2/v1"
        assert ray.get(server.health.remote())["healthy"]
        # One CPU slot stays free for an EvaluatorActor on a 2-CPU Ray: the server takes at most one (the shared
        # Ray has 4, so this counts what it took once it served, when nothing else held any).
        assert smollm2_server.ray_cpus_taken <= 1, smollm2_server.ray_cpus_taken

        pids = ray.get(server.pids.remote())
        titles = [" ".join(psutil.Process(p).cmdline())[:80] for p in processes.alive(pids)]
        assert any("VLLM::EngineCore" in t for t in titles), titles
        assert any("ServeReplica:mkb-smollm2:LLMServer" in t for t in titles), titles
        # Not niced below the machine's other work (Ray's default for workers is 15; mkb_ray/models/local_ray.py).
        niceness = {p: psutil.Process(p).nice() for p in processes.alive(pids)}
        assert set(niceness.values()) == {0}, niceness
        listeners = _listeners(pids)
        assert listeners and all(ip in LOOPBACK_IPS for ip, _ in listeners), listeners

        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        asked = time.monotonic()
        reply = litellm.completion(model="hosted_vllm/smollm2", api_base=info["api_base"], timeout=120,
                                   messages=[{"role": "user", "content": "Name one GPU memory space."}],
                                   max_tokens=32, temperature=0, extra_headers={SESSION_HEADER: "test-attempt"})
        answer_s = time.monotonic() - asked
        assert reply.choices[0].message.content.strip()
        assert reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 32

        again = ray.get(server.start.remote())
        assert again["api_base"] == info["api_base"] and sorted(ray.get(server.pids.remote())) == sorted(pids)
        memory = ray.get(server.memory.remote())
        print(f"\nsmollm2 via {info['placement']['backend']}: start-up {smollm2_server.startup_s:.0f} s, "
              f"{memory['rss_mb']:.0f} MB RSS / {memory['pss_mb']:.0f} MB PSS in {memory['processes']} processes, "
              f"{reply.usage.completion_tokens} tokens in {answer_s:.2f} s")
    finally:
        report = smollm2_server.stop().report  # and kills its actor, as a test's own server was
    assert report["stopped"] and report["still_running"] == [] and report["force_killed"] == []
    assert processes.alive(pids) == [], [psutil.Process(p).cmdline() for p in processes.alive(pids)]
    assert not processes.port_open(info["port"])


def test_on_a_roles_cluster_gpu_replicas_ask_for_the_model_serving_group():
    """Every engine GPU's bundle also asks for mkb_model_gpu, which only the model-serving nodes offer, so a
    replica can never land on an evaluator's GPU; Ray's own config model keeps the bundles as given."""
    llm = pytest.importorskip("ray.serve.llm")
    from mkb_ray.campaign.placement import MODEL_RESOURCE, Placement

    spec = get_model("glm-5.3-flash")
    roles = GpuShare(role=dict(Placement.of("roles").model_gpu))
    kwargs = llm_config_kwargs(spec, "gpu", spec.hf_repo or "", gpu=roles)
    engine = llm.LLMConfig(**kwargs).get_engine_config()
    assert len(engine.placement_bundles) == spec.tensor_parallel_size
    assert all(b.get("GPU") == 1 and b.get(MODEL_RESOURCE) == 1 for b in engine.placement_bundles)
    assert "placement_group_config" not in llm_config_kwargs(spec, "gpu", spec.hf_repo or "")
    # A CPU model has no GPU bundle to tag.
    assert "placement_group_config" not in llm_config_kwargs(get_model("smollm2"), "cpu", "/m",
                                                             gpu=GpuShare(role={MODEL_RESOURCE: 1.0}))


def test_mkb_serve_refuses_a_gpu_share_it_cannot_give(capsys):
    """Bad usage exits 2 before anything starts: a share outside (0, 1], or a share of a GPU the model is not on."""
    from mkb_ray.cli.serve import serve_main

    assert serve_main("smollm2", device="cuda", gpu_fraction=1.5) == 2
    assert serve_main("smollm2", gpu_fraction=0.5) == 2   # the roster puts SmolLM2 on the CPU
    assert "--gpu-fraction 0.5: must be in (0, 1], and below 1 only on a GPU" in capsys.readouterr().err
