#!/usr/bin/env bash
# scripts/export-old-judge.sh [COMMIT] [DIR]
#
# Export the `mkb_ray/` package of an older commit (default 424bdca: the judge before the checker/kernel split,
# one fresh `python -m mkb_ray.judge_worker` per evaluation) into DIR (default .old-judge, at the project root),
# so that benchmarks/evaluator_overhead.py can run that old judge next to the current one, also on a GPU host
# that has no git history (carry DIR there). DIR/mkb_ray is replaced; DIR/COMMIT records the full commit id.
#
#   bash scripts/export-old-judge.sh                       # 424bdca -> .old-judge/mkb_ray
#   bash scripts/export-old-judge.sh 5c27f11 /tmp/judge    # another commit, another place
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
commit=${1:-424bdca}
dir=${2:-$repo/.old-judge}
sha=$(git -C "$repo" rev-parse --verify --quiet "$commit^{commit}") || { echo "no commit '$commit' in $repo" >&2; exit 2; }
mkdir -p "$dir"
rm -rf "${dir:?}/mkb_ray"
git -C "$repo" archive "$sha" mkb_ray | tar -x -C "$dir"
echo "$sha" > "$dir/COMMIT"
echo "exported mkb_ray/ of ${sha:0:12} to $dir"
