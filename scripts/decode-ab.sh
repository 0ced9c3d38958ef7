#!/usr/bin/env bash
# Same-session A/B of the Qwen3-1.7B-shaped decode step (bench/models/profile_decode.py) between
# two builds, for a GPU machine without a package registry. Device sessions differ by a few
# percent, so a change is judged only against its baseline measured beside it.
#
#   here:    scripts/decode-ab.sh REV_A [REV_B] [-- PROFILE_ARGS_OF_B...]
#            REV_B defaults to the working tree (tracked and untracked, not ignored, files);
#            PROFILE_ARGS_OF_B go to side B's builds and runs only, e.g.
#              scripts/decode-ab.sh HEAD HEAD -- --option "gemm_fusion='all'"
#   device:  bash .ab/run.sh, carrying .ab (about 5 minutes): writes the checkpoint, builds both
#            sides in parallel (separate build caches), then profiles b, a, b, a and prints each
#            run's replayed tokens/s; every output lands in $OUT.
#
# Needs ./.whl filled by scripts/gpu-wheels.sh (the third-party wheels are copied from there).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
[ $# -ge 1 ] || { echo "usage: scripts/decode-ab.sh REV_A [REV_B] [-- PROFILE_ARGS_OF_B...]" >&2; exit 2; }
rev_a=$1
shift
rev_b=""
if [ $# -ge 1 ] && [ "$1" != "--" ]; then
  rev_b=$1
  shift
fi
[ $# -ge 1 ] && [ "$1" = "--" ] && shift
b_args=("$@")
ls .whl/apache_tvm_ffi-*.whl .whl/nvidia_cutlass-*.whl >/dev/null 2>&1 \
  || { echo "decode-ab: .whl lacks apache-tvm-ffi or nvidia-cutlass; run scripts/gpu-wheels.sh first" >&2; exit 1; }
grep -qxF "/.ab/" .git/info/exclude 2>/dev/null || echo "/.ab/" >> .git/info/exclude
rm -rf .ab
mkdir -p .ab/a .ab/b

# side DIR REV: the tree of REV (or of the working tree when REV is empty) with its wheels.
side() {
  local dir=$1 rev=$2
  if [ -n "$rev" ]; then
    git archive "$rev" | tar -x -C "$dir"
  else
    git ls-files -z --cached --others --exclude-standard | xargs -0 tar -c | tar -x -C "$dir"
  fi
  mkdir -p "$dir/.whl"
  find .whl -maxdepth 1 -type f -name '*.whl' ! -name 'tilefoundry*' -exec cp {} "$dir/.whl/" \;
  (cd "$dir" && uv build -q --all-packages --wheel -o .whl)
}
side .ab/a "$rev_a"
side .ab/b "$rev_b"
{
  echo "a: $(git rev-parse --short "$rev_a")"
  echo "b: ${rev_b:+$(git rev-parse --short "$rev_b")}${rev_b:-working tree of $(git rev-parse --short HEAD)} ${b_args[*]}"
} > .ab/sides.txt

if [ ${#b_args[@]} -gt 0 ]; then printf '%q ' "${b_args[@]}" > .ab/b_args.txt; else : > .ab/b_args.txt; fi
cat > .ab/run.sh <<'EOF'
#!/usr/bin/env bash
# Written by scripts/decode-ab.sh: run on the GPU machine with .ab carried.
cd "$(dirname "$0")"
cat sides.txt
eval "b_args=($(cat b_args.txt))"
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")} PYTHONUNBUFFERED=1
for s in a b; do
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/ab-site-$s $s/.whl/*.whl || exit 1
done
run() {  # run SIDE CMD...: in that side's tree, with its site and build cache
  local s=$1
  shift
  (cd "$s" && PYTHONPATH=/tmp/ab-site-$s:$PWD TILEFOUNDRY_CACHE_DIR=/tmp/ab-cache-$s "$@")
}
opts() { [ "$1" = b ] && printf '%s\n' "${b_args[@]}"; }
t0=$(date +%s)
[ -d /tmp/q3/qwen3-1.7b-random ] || run a python3 -c "from pathlib import Path; \
from bench.models.generate_qwen3 import write_checkpoint; write_checkpoint(Path('/tmp/q3'), 28)" >/dev/null
for s in a b; do
  mapfile -t o < <(opts $s)
  run $s python3 bench/models/profile_decode.py --out /tmp/q3 --compile-only "${o[@]}" > "$OUT/compile-$s.txt" 2>&1 &
done
wait
echo "built both in $(( $(date +%s) - t0 )) s"
i=0
for s in b a b a; do
  i=$((i + 1))
  mapfile -t o < <(opts $s)
  run $s timeout 90 python3 bench/models/profile_decode.py --out /tmp/q3 --steps 2 --top 16 "${o[@]}" \
    > "$OUT/profile-$i-$s.txt" 2>&1
  echo "$i $s: $(grep -h 'graph replay' "$OUT/profile-$i-$s.txt")"
done
echo "all $(( $(date +%s) - t0 )) s"
EOF
chmod +x .ab/run.sh
cat .ab/sides.txt
echo "carry .ab and run: bash .ab/run.sh"
