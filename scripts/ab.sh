#!/usr/bin/env bash
# Same-session A/B between builds, for a GPU machine without a package registry: the
# Qwen3-1.7B-shaped decode step (bench/models/profile_decode.py), or with --bench the kernel rows
# of bench/gpu. Device sessions differ by a few percent (an unchanged GEMM row by up to 10%), so
# a change is judged only against its baseline measured beside it.
#
#   here:    scripts/ab.sh [--runs N] [--bench "BENCH_ARGS"] REV_A [REV_B ...] [-- ARGS_OF_THE_LAST...]
#            Each REV is a commit or branch, or `.` for the working tree (tracked and untracked,
#            not ignored, files), optionally followed by compile options for that side alone,
#            each as +KEY=VALUE; one REV alone is compared with the working tree. The ARGS go
#            to the last side's builds and runs only, e.g.
#              scripts/ab.sh HEAD HEAD -- --option "gemm_fusion='all'"
#              scripts/ab.sh HEAD HEAD+batch_launches=False
#              scripts/ab.sh --bench "--cases rope,rms_norm --peers compile" main pack-uniform
#   device:  bash .ab/run.sh, carrying .ab. Decode: writes the checkpoint, builds every side in
#            parallel (separate build caches; two sides built in about 3 minutes on 2026-11-30,
#            more take longer, and one device call has 10), then profiles the sides in reverse
#            order, N passes (--runs, default 2; a pass of a side takes ~11 s), printing each
#            run's replayed tokens/s. --bench: runs `python3 -m bench.gpu.run BENCH_ARGS` for each
#            side in reverse order, N passes (the later ones hit the side's build cache),
#            printing each table; pass a --budget-s that lets the runs fit the call. Outputs land
#            in $OUT (the bench files as ab-bench.tgz).
#
# Needs ./.whl filled by scripts/gpu-wheels.sh (the third-party wheels are copied from there).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
runs=2
if [ "${1:-}" = "--runs" ]; then
  runs=${2:?"--runs needs a count"}
  [[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "ab: --runs takes a positive count, got '$runs'" >&2; exit 2; }
  shift 2
fi
bench=""
if [ "${1:-}" = "--bench" ]; then
  bench=${2:?"--bench needs the bench.gpu.run arguments"}
  shift 2
fi
revs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  revs+=("$1")
  shift
done
[ $# -gt 0 ] && shift
last_args=("$@")
[ ${#revs[@]} -ge 1 ] || { echo "usage: scripts/ab.sh [--bench \"BENCH_ARGS\"] REV_A [REV_B ...] [-- ARGS_OF_THE_LAST...]" >&2; exit 2; }
[ ${#revs[@]} -ge 2 ] || revs+=(".")
[ ${#revs[@]} -le 4 ] || { echo "ab: at most 4 sides fit one device call" >&2; exit 2; }
ls .whl/apache_tvm_ffi-*.whl .whl/nvidia_cutlass-*.whl >/dev/null 2>&1 \
  || { echo "ab: .whl lacks apache-tvm-ffi or nvidia-cutlass; run scripts/gpu-wheels.sh first" >&2; exit 1; }
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
  IFS=+ read -r -a parts <<< "${revs[$i]}"
  revs[i]=${parts[0]}
  : > ".ab/$s.options"
  for o in "${parts[@]:1}"; do printf '%q %q ' --option "$o" >> ".ab/$s.options"; done
  if [ "${revs[$i]}" = "." ]; then
    git ls-files -z --cached --others --exclude-standard | xargs -0 tar -c | tar -x -C ".ab/$s"
    commit="$(git rev-parse --short HEAD)+worktree"
    what="working tree of $(git rev-parse --short HEAD)"
  else
    git archive "${revs[$i]}" | tar -x -C ".ab/$s"
    commit=$(git rev-parse --short "${revs[$i]}")
    what="${revs[$i]} ($commit)"
  fi
  echo "$commit" > ".ab/$s.commit"  # the bench header's commit (the side's tree has no .git)
  (cd ".ab/$s" && uv build -q --all-packages --wheel -o .whl)
  echo "$s: $what${parts[1]:+ with ${parts[*]:1}}" >> .ab/sides.txt
done
if [ ${#last_args[@]} -gt 0 ]; then
  printf '%q ' "${last_args[@]}" > .ab/last_args.txt
  echo "${sides[-1]} also: ${last_args[*]}" >> .ab/sides.txt
else
  : > .ab/last_args.txt
fi
echo "${sides[*]}" > .ab/side_names.txt
printf '%s' "$bench" > .ab/bench_args.txt
echo "$runs" > .ab/runs.txt
[ -z "$bench" ] || echo "all: python3 -m bench.gpu.run $bench" >> .ab/sides.txt

cat > .ab/run.sh <<'EOF'
#!/usr/bin/env bash
# Written by scripts/ab.sh: run on the GPU machine with .ab carried.
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
  local commit
  commit=$(cat "$s.commit")  # read beside the side's tree, before entering it
  (cd "$s" && PYTHONPATH=/tmp/ab-site-$s:$PWD TILEFOUNDRY_CACHE_DIR=/tmp/ab-cache-$s \
    TILEFOUNDRY_COMMIT=$commit "$@")
}
opts() {  # the side's own options, then (the last side) the ARGS after --
  eval "local own=($(cat "$1.options"))"
  [ ${#own[@]} -gt 0 ] && printf '%s\n' "${own[@]}"
  [ "$1" = "$last" ] && [ ${#last_args[@]} -gt 0 ] && printf '%s\n' "${last_args[@]}"
  return 0
}
order=()
for ((i = ${#sides[@]} - 1; i >= 0; i--)); do order+=("${sides[$i]}"); done
passes=()  # the sides in reverse order, once a pass
for ((p = 0; p < $(cat runs.txt); p++)); do passes+=("${order[@]}"); done
t0=$(date +%s)
eval "bench=($(cat bench_args.txt))"
if [ ${#bench[@]} -gt 0 ]; then
  rm -rf /tmp/ab-bench && mkdir -p /tmp/ab-bench  # one archive back: $OUT returns few files
  i=0
  for s in "${passes[@]}"; do
    i=$((i + 1))
    mapfile -t o < <(opts "$s")
    run "$s" python3 -m bench.gpu.run "${bench[@]}" "${o[@]}" --cache-dir "/tmp/ab-cache-$s" \
      --out "/tmp/ab-bench/$i-$s" > "/tmp/ab-bench/$i-$s.txt" 2>&1
    echo "== $i $s =="
    grep -E '^\|' "/tmp/ab-bench/$i-$s.txt" || tail -n 5 "/tmp/ab-bench/$i-$s.txt"
  done
  tar -czf "$OUT/ab-bench.tgz" -C /tmp ab-bench
  echo "all $(( $(date +%s) - t0 )) s"
  exit 0
fi
[ -d /tmp/q3/qwen3-1.7b-random ] || run "${sides[0]}" python3 -c "from pathlib import Path; \
from bench.models.generate_qwen3 import write_checkpoint; write_checkpoint(Path('/tmp/q3'), 28)" >/dev/null
for s in "${sides[@]}"; do
  mapfile -t o < <(opts "$s")
  run "$s" python3 bench/models/profile_decode.py --out /tmp/q3 --compile-only "${o[@]}" > "$OUT/compile-$s.txt" 2>&1 &
done
wait
echo "built ${#sides[@]} sides in $(( $(date +%s) - t0 )) s"
i=0
for s in "${passes[@]}"; do
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
