#!/usr/bin/env bash
# For the campaign proof on the offline GPU host (`STEP=campaign bash .ci/gpu-check`): stage Ray 2.60 and its
# runtime dependencies for Python 3.12 in two more git-ignored folders (.gpu5, .gpu6 — the Ray wheel alone is
# 79 MB, over one transfer's 64 MiB). Send them after ../shared/OFFLINE_GPU.md's four, each with
# `mkdir -p /tmp/gpu-ray && cp .gpuN/* /tmp/gpu-ray/`; .ci/gpu-check reassembles and installs them.
set -euo pipefail
dl=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dl" \
  ray==2.60.0 msgpack click filelock jsonschema jsonschema-specifications referencing rpds-py attrs requests \
  urllib3 idna certifi charset-normalizer pyyaml psutil protobuf 2>&1 | grep -v "^WARNING: Location" || true
rm -rf .gpu5 .gpu6 && parts=$(mktemp -d)
tar -C "$dl" -cf "$parts/ray.tar" . && split -n 2 -d "$parts/ray.tar" "$parts/ray.tar.part-" && rm "$parts/ray.tar"
for i in 5 6; do
  mkdir -p ".gpu$i" && mv "$parts/ray.tar.part-0$((i - 5))" ".gpu$i/"
  grep -qx "/.gpu$i/" .git/info/exclude 2>/dev/null || echo "/.gpu$i/" >> .git/info/exclude
done
rm -rf "$dl" "$parts"
du -sh .gpu5 .gpu6
