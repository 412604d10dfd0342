#!/usr/bin/env bash
# The staged folders (.gpv* from scripts/stage-gpu-vllm.sh, .gpu* from scripts/stage-gpu-xz.sh, .gpm* from
# scripts/stage-gpu-mkb.sh; their contents already xz-compressed) repacked into as few device transfers as fit: one
# tar of the named folders, cut into CHUNK_BYTES pieces in git-ignored folders .gpx1 .. .gpxN. Each transfer carries
# the working tree (~11 MB) beside its piece, under the tool's 64 MiB; the host is released 30 s after a call, so the
# pieces go back to back:
#   with each .gpxK:   mkdir -p /tmp/carry && cp .gpxK/* /tmp/carry/
# then `bash scripts/gpu/serving-proof.sh install` puts the folders back under /tmp/staged and installs them.
# Usage: bash scripts/gpu/pack-transfers.sh .gpv* .gpu1 .gpu2 .gpu3 .gpm*   (from the project root)
set -euo pipefail
CHUNK_BYTES=${CHUNK_BYTES:-52000000}
(( $# )) || { echo "usage: pack-transfers.sh FOLDER..." >&2; exit 2; }
rm -rf .gpx[0-9] .gpx[0-9][0-9]
pieces=$(mktemp -d)
tar -cf - "$@" | split -b "$CHUNK_BYTES" -d -a 3 - "$pieces/chunk-"
i=0
for piece in "$pieces"/chunk-*; do i=$((i + 1)); mkdir -p ".gpx$i"; mv "$piece" ".gpx$i/"; done
rmdir "$pieces"
echo "$i transfers of at most $CHUNK_BYTES bytes for: $*"
