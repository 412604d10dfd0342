#!/usr/bin/env bash
# After ../shared/device/stage-wheels.sh: add the pure-Python wheels our parent side needs on the offline GPU host
# (pydantic, rich, psutil, pytest and their dependencies, for Python 3.12) and bubblewrap (the kernel sandbox) to
# the last staging folder, where .ci/gpu-check installs them from. Run from the project root.
set -euo pipefail
command -v bwrap >/dev/null || { echo "stage-gpu-extras: no bwrap here to stage; run scripts/install-system.sh first" >&2; exit 1; }
last=$(ls -d .gpu[0-9] | sort | tail -n 1)
mkdir -p "$last/py"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$last/py" \
  pydantic pydantic-core rich pygments markdown-it-py mdurl typing-extensions annotated-types typing-inspection psutil \
  pytest pluggy iniconfig packaging 2>&1 | grep -v "^WARNING: Location" || true
# bubblewrap for the kernel sandbox (the GPU host has none): the binary and the libraries it links, run through
# the host's dynamic loader with --library-path, so nothing it starts inherits a changed LD_LIBRARY_PATH.
mkdir -p "$last/bwrap/lib"
cp "$(command -v bwrap)" "$last/bwrap/bwrap.bin"
for lib in $(ldd "$(command -v bwrap)" | awk '/=> \//{print $3}' | grep -v -e libc.so -e ld-linux); do cp "$lib" "$last/bwrap/lib/"; done
cat > "$last/bwrap/bwrap" <<'SH'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")
exec /lib64/ld-linux-x86-64.so.2 --library-path "$d/lib" "$d/bwrap.bin" "$@"
SH
chmod +x "$last/bwrap/bwrap"
du -sh "$last"
echo "on the host, after install-on-gpu.sh: bash .ci/gpu-check $last/py"
