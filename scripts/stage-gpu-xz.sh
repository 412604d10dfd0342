#!/usr/bin/env bash
# A denser staging than ../shared/device/stage-wheels.sh, for when every transfer counts (the GPU host is released
# after 30 s idle, taking what was staged with it): the CuTe DSL and TVM wheels unpacked into one site tree,
# xz-compressed (184 MB of wheels -> 124 MB) and cut into three folders .gpu1-.gpu3 that fit one transfer each
# beside the working tree; scripts/stage-gpu-extras.sh's parts (our pure-Python wheels, bubblewrap) go in the last.
# Run from the project root, after stage-wheels.sh and stage-gpu-extras.sh (it reuses their downloads). On the host:
#   with .gpu1, .gpu2: mkdir -p /tmp/gpu-wheels && cp .gpuN/site.tar.xz.part-* /tmp/gpu-wheels/
#   with .gpu3:        bash .gpu3/install-xz.sh .gpu3    (then .ci/gpu-check .gpu3/py)
set -euo pipefail
work=$(mktemp -d); mkdir -p "$work/whl" "$work/site"
cat .gpu[0-9]/wheels.tar.part-* | tar -C "$work/whl" -xf -
for w in "$work"/whl/*.whl; do unzip -q -o "$w" -d "$work/site"; done  # unzip keeps the executable bits
extras=$(mktemp -d); last=$(ls -d .gpu[0-9] | sort | tail -n 1)
mv "$last/py" "$last/bwrap" "$extras/"
source scripts/lib/site-parts.sh
i=$(pack_site_parts "$work/site" gpu 7)
mv "$extras/py" "$extras/bwrap" ".gpu$i/"
write_site_installer ".gpu$i/install-xz.sh" /tmp/gpu-wheels /tmp/gpu-site \
  /tmp/gpu-site:/tmp/gpu-site/nvidia_cutlass_dsl/dsl_packages \
  'import cutlass, tvm, torch; print("ok: cutlass", cutlass.__version__, "tvm", tvm.__version__, torch.cuda.get_device_name(0))'
rm -rf "$work" "$extras"
du -sh .gpu[0-9]
