#!/usr/bin/env bash
# After ../shared/device/stage-wheels.sh: add the pure-Python wheels our parent side needs on the offline GPU host
# (pydantic, rich, psutil, pytest and their dependencies, for Python 3.12) to the last staging folder, where
# .ci/gpu-check installs them from. Run from the project root.
set -euo pipefail
last=$(ls -d .gpu[0-9] | sort | tail -n 1)
mkdir -p "$last/py"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$last/py" \
  pydantic pydantic-core rich pygments markdown-it-py mdurl typing-extensions annotated-types typing-inspection psutil \
  pytest pluggy iniconfig packaging 2>&1 | grep -v "^WARNING: Location" || true
du -sh "$last"
echo "on the host, after install-on-gpu.sh: bash .ci/gpu-check $last/py"
