# Sourced by scripts/stage-gpu-xz.sh, stage-gpu-vllm.sh and stage-gpu-mkb.sh (the packer only): a site tree
# xz-packed and cut into folders of one transfer each, and the installer that puts it back together on the GPU
# host (released 30 s after a call, so the folders go back to back; every part but the last is copied to the
# host's parts directory as it comes).

SITE_PART_BYTES=42000000   # beside the working tree (~11 MB), within one transfer's 64 MiB

# pack_site_parts SITE PREFIX XZ_LEVEL: replaces .PREFIX1 .. .PREFIXn in the current directory with the parts of
# SITE's tar.xz; prints n.
pack_site_parts() {
  local site=$1 prefix=$2 level=$3 pieces part i=0
  pieces=$(mktemp -d)
  rm -rf ".$prefix"[0-9] ".$prefix"[0-9][0-9]
  tar -C "$site" -cf - . | xz -T0 -"$level" | split -b "$SITE_PART_BYTES" -d - "$pieces/site.tar.xz.part-"
  for part in "$pieces"/site.tar.xz.part-*; do i=$((i + 1)); mkdir -p ".$prefix$i"; mv "$part" ".$prefix$i/"; done
  rmdir "$pieces"
  echo "$i"
}

# write_site_installer FILE HOST_PARTS HOST_SITE PYTHONPATH CHECK: FILE, run on the host as `bash FILE FOLDER`
# with the last part's folder, gathers that part into HOST_PARTS, unpacks every part into HOST_SITE, writes
# HOST_PARTS/env.sh (PYTHONPATH first, for the processes that source it) and runs the Python CHECK under it.
write_site_installer() {
  local file=$1 parts=$2 site=$3 pythonpath=$4 check=$5
  cat > "$file" <<SH
#!/usr/bin/env bash
# On the GPU host: gather the last part, unpack the site tree into $site, write $parts/env.sh, check the imports.
set -euo pipefail
mkdir -p $parts $site
cp "\${1:?folder of the last part}"/site.tar.xz.part-* $parts/
cat $parts/site.tar.xz.part-* | xz -d | tar -C $site -xf -
echo 'export PYTHONPATH=$pythonpath\${PYTHONPATH:+:\$PYTHONPATH}' > $parts/env.sh
source $parts/env.sh
python3 -c '$check'
SH
}
