"""vLLM's CUDA backend on the GPU host, offline (no Serve, no HTTP): an engine on a model directory's config and
tokenizer with random weights (`load_format="dummy"`), then decode tokens/s at 1, 8 and 32 concurrent streams.

The first thing to run after `scripts/stage-gpu-vllm.sh`'s parts are installed (`source /tmp/vllm-parts/env.sh`):
does the engine start, and what does plain vLLM serve on this GPU — the baseline issue 31 compares our Serve layer
against. Usage: python3 vllm_dummy_throughput.py MODEL_DIR   (writes $OUT/dummy_tok_s.json when OUT is set)."""
from __future__ import annotations

import json
import os
import sys
import time

STREAMS = (1, 8, 32)
TOKENS_PER_STREAM = 128
PROMPT = "Write a CUDA kernel that adds two vectors."


def main(model_dir: str) -> dict[int, float]:
    began = time.time()
    import vllm
    from vllm import LLM, SamplingParams

    print("import vllm", vllm.__version__, round(time.time() - began, 1), "s", flush=True)
    began = time.time()
    # bf16 and eager (no CUDA graphs, no torch.compile): what a first start on a bare host can do without caches.
    llm = LLM(model=model_dir, load_format="dummy", dtype="bfloat16", max_model_len=2048,
              gpu_memory_utilization=0.3, enforce_eager=True, seed=0)
    print("engine up", round(time.time() - began, 1), "s", flush=True)
    rates: dict[int, float] = {}
    for streams in STREAMS:
        params = SamplingParams(max_tokens=TOKENS_PER_STREAM, ignore_eos=True, temperature=0.0)
        began = time.time()
        results = llm.generate([PROMPT] * streams, params, use_tqdm=False)
        seconds = time.time() - began
        tokens = sum(len(r.outputs[0].token_ids) for r in results)
        rates[streams] = round(tokens / seconds, 1)
        print(f"streams {streams}: {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.0f} tok/s", flush=True)
    return rates


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    measured = main(sys.argv[1])
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "dummy_tok_s.json"), "w") as handle:
            json.dump(measured, handle)
