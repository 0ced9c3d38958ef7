#!/usr/bin/env bash
# Run the `gpu`-marked tests on a machine with a CUDA GPU and no package registry.
# Needs ./.whl filled by scripts/gpu-wheels.sh (carried along with the tree). Installs the wheels
# into a scratch site dir, fills the CUTLASS headers from the carried wheel, runs pytest and
# prints a one-line summary. Extra arguments go to pytest (e.g. -k attention).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
site=${TILEFOUNDRY_GPU_SITE:-/tmp/tilefoundry-site}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
# One build cache, named here so a second run on the same machine finds the first's builds
# (conftest.py otherwise makes one under the session's temporary directory, for all its workers).
export TILEFOUNDRY_CACHE_DIR=${TILEFOUNDRY_CACHE_DIR:-/tmp/tilefoundry-gpu-cache}
# Each worker's builds compile their translation units side by side; two a build keeps the
# workers' nvcc processes (several GB each) within the machine's memory.
export TILEFOUNDRY_NVCC_UNITS=${TILEFOUNDRY_NVCC_UNITS:-2}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
# pytest-xdist (carried by gpu-wheels.sh; pyproject's addopts ask for it): one worker per test
# file, so the files' nvcc builds run in parallel and each module-scoped build happens once.
python3 -c "import xdist" 2>/dev/null \
  || { echo "gpu-tests: pytest-xdist is not installed; run scripts/gpu-wheels.sh to carry it" >&2; exit 1; }
python3 -m pytest -m gpu -p no:cacheprovider -rfE --durations=15 -n "${TILEFOUNDRY_GPU_JOBS:-8}" --dist loadfile \
  "$@" packages tests 2>&1 | tee /tmp/tilefoundry-gpu-tests.log
status=${PIPESTATUS[0]}
# pytest's own summary line (with -q and xdist the log may end in the durations instead)
summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error)' /tmp/tilefoundry-gpu-tests.log | tail -n 1)
echo "gpu suite: ${summary:-no pytest summary line in the log} (exit $status) on $(date -u +%F)"
exit "$status"
