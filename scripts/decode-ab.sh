#!/usr/bin/env bash
# Same-session A/B of the Qwen3-1.7B-shaped decode step (bench/models/profile_decode.py) between
# builds, for a GPU machine without a package registry. Device sessions differ by a few percent,
# so a change is judged only against its baseline measured beside it.
#
#   here:    scripts/decode-ab.sh REV_A [REV_B ...] [-- PROFILE_ARGS_OF_THE_LAST...]
#            Each REV is a commit or branch, or `.` for the working tree (tracked and untracked,
#            not ignored, files); one REV alone is compared with the working tree. The
#            PROFILE_ARGS go to the last side's builds and runs only, e.g.
#              scripts/decode-ab.sh HEAD HEAD -- --option "gemm_fusion='all'"
#   device:  bash .ab/run.sh, carrying .ab: writes the checkpoint, builds every side in parallel
#            (separate build caches; two sides built in about 3 minutes on 2026-11-30, more take
#            longer, and one device call has 10), then profiles the sides in reverse order and
#            again, printing each run's replayed tokens/s; every output lands in $OUT.
#
# Needs ./.whl filled by scripts/gpu-wheels.sh (the third-party wheels are copied from there).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
revs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  revs+=("$1")
  shift
done
[ $# -gt 0 ] && shift
last_args=("$@")
[ ${#revs[@]} -ge 1 ] || { echo "usage: scripts/decode-ab.sh REV_A [REV_B ...] [-- PROFILE_ARGS_OF_THE_LAST...]" >&2; exit 2; }
[ ${#revs[@]} -ge 2 ] || revs+=(".")
[ ${#revs[@]} -le 4 ] || { echo "decode-ab: at most 4 sides fit one device call" >&2; exit 2; }
ls .whl/apache_tvm_ffi-*.whl .whl/nvidia_cutlass-*.whl >/dev/null 2>&1 \
  || { echo "decode-ab: .whl lacks apache-tvm-ffi or nvidia-cutlass; run scripts/gpu-wheels.sh first" >&2; exit 1; }
grep -qxF "/.ab/" .git/info/exclude 2>/dev/null || echo "/.ab/" >> .git/info/exclude
rm -rf .ab
mkdir -p .ab/deps
find .whl -maxdepth 1 -type f -name '*.whl' ! -name 'tilefoundry*' -exec cp {} .ab/deps/ \;
names=(a b c d)
sides=()
: > .ab/sides.txt
for i in "${!revs[@]}"; do
  s=${names[$i]}
  sides+=("$s")
  mkdir -p ".ab/$s/.whl"
  if [ "${revs[$i]}" = "." ]; then
    git ls-files -z --cached --others --exclude-standard | xargs -0 tar -c | tar -x -C ".ab/$s"
    what="working tree of $(git rev-parse --short HEAD)"
  else
    git archive "${revs[$i]}" | tar -x -C ".ab/$s"
    what="${revs[$i]} ($(git rev-parse --short "${revs[$i]}"))"
  fi
  (cd ".ab/$s" && uv build -q --all-packages --wheel -o .whl)
  echo "$s: $what" >> .ab/sides.txt
done
if [ ${#last_args[@]} -gt 0 ]; then
  printf '%q ' "${last_args[@]}" > .ab/last_args.txt
  echo "${sides[-1]} also: ${last_args[*]}" >> .ab/sides.txt
else
  : > .ab/last_args.txt
fi
echo "${sides[*]}" > .ab/side_names.txt

cat > .ab/run.sh <<'EOF'
#!/usr/bin/env bash
# Written by scripts/decode-ab.sh: run on the GPU machine with .ab carried.
cd "$(dirname "$0")"
cat sides.txt
read -r -a sides < side_names.txt
eval "last_args=($(cat last_args.txt))"
last=${sides[-1]}
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")} PYTHONUNBUFFERED=1
for s in "${sides[@]}"; do  # a warm machine keeps the last call's sites and caches: start clean
  rm -rf "/tmp/ab-site-$s" "/tmp/ab-cache-$s"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "/tmp/ab-site-$s" deps/*.whl "$s"/.whl/*.whl \
    || exit 1
done
run() {  # run SIDE CMD...: in that side's tree, with its site and build cache
  local s=$1
  shift
  (cd "$s" && PYTHONPATH=/tmp/ab-site-$s:$PWD TILEFOUNDRY_CACHE_DIR=/tmp/ab-cache-$s "$@")
}
opts() { [ "$1" = "$last" ] && [ ${#last_args[@]} -gt 0 ] && printf '%s\n' "${last_args[@]}"; }
t0=$(date +%s)
[ -d /tmp/q3/qwen3-1.7b-random ] || run "${sides[0]}" python3 -c "from pathlib import Path; \
from bench.models.generate_qwen3 import write_checkpoint; write_checkpoint(Path('/tmp/q3'), 28)" >/dev/null
for s in "${sides[@]}"; do
  mapfile -t o < <(opts "$s")
  run "$s" python3 bench/models/profile_decode.py --out /tmp/q3 --compile-only "${o[@]}" > "$OUT/compile-$s.txt" 2>&1 &
done
wait
echo "built ${#sides[@]} sides in $(( $(date +%s) - t0 )) s"
order=()
for ((i = ${#sides[@]} - 1; i >= 0; i--)); do order+=("${sides[$i]}"); done
i=0
for s in "${order[@]}" "${order[@]}"; do
  i=$((i + 1))
  mapfile -t o < <(opts "$s")
  run "$s" timeout 90 python3 bench/models/profile_decode.py --out /tmp/q3 --steps 2 --top 16 "${o[@]}" \
    > "$OUT/profile-$i-$s.txt" 2>&1
  echo "$i $s: $(grep -h 'graph replay' "$OUT/profile-$i-$s.txt")"
done
echo "all $(( $(date +%s) - t0 )) s"
EOF
chmod +x .ab/run.sh
cat .ab/sides.txt
echo "carry .ab and run: bash .ab/run.sh"
