#!/usr/bin/env bash
# Issue 31: stage vLLM 0.26.0 (the release pinned to the GPU host's torch 2.11; its extensions link libcudart.so.13,
# the host's CUDA) with Ray Serve 2.60 for the offline GPU host, in a site directory of its own (/tmp/vllm-site:
# vLLM pins nvidia-cutlass-dsl 4.6.0 and apache-tvm-ffi 0.1.10, the judge's /tmp/gpu-site has 4.8.1 and 0.1.12).
#
# What the host already has at a fitting version is not staged: its package list (scripts/gpu-host-packages.txt)
# becomes stub install records in a Python 3.12 venv, and that venv's pip resolves vLLM's requirements against them,
# so only the missing or conflicting ones are downloaded (measured 2026-12-06: 120 packages, numpy 2.3 and protobuf 6
# among them — mistral-common needs numpy<2.4 and cutlass-dsl 4.6 protobuf<7 — which shadow the host's only in
# processes that put /tmp/vllm-site first). llguidance 1.7 is not in our registry: 1.6.1 is staged instead (vLLM's
# engine imports it at start-up; measured on the H100, 2026-12-06). Left out, with vLLM installed without its own
# dependency check: numba (0.65 wants an older numpy; the host has 0.68), torch/torchvision/
#   torchaudio (on the host, at the pinned versions), and kernels an fp32/bf16 SmolLM2 never loads: tilelang,
#   humming-kernels, quack-kernels, tokenspeed-mla, PyNvVideoCodec, torchcodec, and CuTe DSL's CUDA 12 libraries.
# Whether `vllm serve` starts without them is what the first run on the host shows (benchmarks/results/ says).
#
# Output: git-ignored folders .gpv1 .. .gpvN, one transfer each, sent back to back (the host is released 30 s after a
# call, and /tmp with it). On the host:
#   with each but the last: mkdir -p /tmp/vllm-parts && cp .gpvK/site.tar.xz.part-* /tmp/vllm-parts/
#   with the last:          bash .gpvN/install-vllm.sh .gpvN      (unpacks, writes /tmp/vllm-parts/env.sh, imports vllm)
# Run from the project root. Needs python3.12 here (PY312=...) and the registry.
set -euo pipefail
PY312=${PY312:-python3.12}
VLLM_VERSION=0.26.0
RAY_SERVE="ray[serve]==2.60.0"
LLGUIDANCE="llguidance==1.6.1"   # the newest our registry has; vLLM 0.26.0 asks for >=1.7,<1.8
LEFT_OUT='^(llguidance|numba|torch|torchaudio|torchvision|tilelang|humming-kernels|quack-kernels|tokenspeed-mla|PyNvVideoCodec|torchcodec)([^A-Za-z0-9_.-]|$)'
NOT_ON_CUDA13='^nvidia-cutlass-dsl-libs-cu12=='

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/whl" "$work/site"
"$PY312" -m venv "$work/resolver"
resolver="$work/resolver/bin/python"
"$resolver" scripts/lib/stub_records.py scripts/gpu-host-packages.txt
"$resolver" -m pip download -q --no-deps --only-binary=:all: -d "$work/whl" "vllm==$VLLM_VERSION" 2>&1 \
  | grep -v "^WARNING: Location" || true
"$resolver" - "$work"/whl/vllm-*.whl "$LEFT_OUT" > "$work/requirements.txt" <<'PY'
import re, sys, zipfile
wheel, left_out = zipfile.ZipFile(sys.argv[1]), re.compile(sys.argv[2])
metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()
for line in metadata.splitlines():
    if line.startswith("Requires-Dist: ") and "extra ==" not in line:
        requirement = line[len("Requires-Dist: "):]
        if not left_out.match(requirement):
            print(requirement)
PY
"$resolver" -m pip install --dry-run -q --only-binary=:all: --report "$work/report.json" \
  -r "$work/requirements.txt" "$RAY_SERVE" "$LLGUIDANCE" 2>&1 | grep -v "^WARNING: Location" || true
"$resolver" - "$work/report.json" > "$work/closure.txt" <<'PY'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    print(f"{item['metadata']['name']}=={item['metadata']['version']}")
PY
grep -v -E "$NOT_ON_CUDA13" "$work/closure.txt" > "$work/staged.txt"
"$resolver" -m pip download -q --no-deps --only-binary=:all: -d "$work/whl" -r "$work/staged.txt" 2>&1 \
  | grep -v "^WARNING: Location" || true
for w in "$work"/whl/*.whl; do unzip -q -o "$w" -d "$work/site"; done  # unzip keeps the executable bits
cp "$work/staged.txt" "$work/site/STAGED-PACKAGES.txt"
cp "$work/staged.txt" scripts/gpu-vllm-site-packages.txt   # what scripts/stage-gpu-mkb.sh resolves against
source scripts/lib/site-parts.sh
i=$(pack_site_parts "$work/site" gpv 6)
# The site goes first on PYTHONPATH only in the processes that source env.sh: the serving ones.
write_site_installer ".gpv$i/install-vllm.sh" /tmp/vllm-parts /tmp/vllm-site /tmp/vllm-site \
  'import vllm, ray, ray.serve, torch; print("ok: vllm", vllm.__version__, "ray", ray.__version__, torch.cuda.get_device_name(0))'
echo "staged $(wc -l < "$work/staged.txt") packages + vllm $VLLM_VERSION in $i parts:"
du -sh .gpv[0-9]*
