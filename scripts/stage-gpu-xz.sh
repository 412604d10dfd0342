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
rm -rf .gpu[0-9]
tar -C "$work/site" -cf - . | xz -T0 -7 | split -b 42000000 -d - "$work/site.tar.xz.part-"
i=0
for p in "$work"/site.tar.xz.part-*; do i=$((i + 1)); mkdir -p ".gpu$i"; mv "$p" ".gpu$i/"; done
mv "$extras/py" "$extras/bwrap" ".gpu$i/"
cat > ".gpu$i/install-xz.sh" <<'SH'
#!/usr/bin/env bash
# On the GPU host: gather the last part, unpack the site tree into /tmp/gpu-site, write env.sh.
set -euo pipefail
w=/tmp/gpu-wheels; mkdir -p "$w" /tmp/gpu-site
cp "${1:?folder of the last part}"/site.tar.xz.part-* "$w"/
cat "$w"/site.tar.xz.part-* | xz -d | tar -C /tmp/gpu-site -xf -
echo 'export PYTHONPATH=/tmp/gpu-site:/tmp/gpu-site/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}' > "$w"/env.sh
source "$w"/env.sh
python3 -c 'import cutlass, tvm, torch; print("ok: cutlass", cutlass.__version__, "tvm", tvm.__version__, torch.cuda.get_device_name(0))'
SH
rm -rf "$work" "$extras"
du -sh .gpu[0-9]
