#!/usr/bin/env bash
# Fill ./.whl (git-ignored) with everything a GPU machine without a package registry needs:
# the third-party wheels it lacks (via ../shared/tools/device-wheels.sh when present, else pip
# download of the same list) and this project's own members built as wheels.
# Usage, from the repository root: scripts/gpu-wheels.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qxF "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
mkdir -p .whl
# One version of each: pip on the GPU machine refuses two. The versions come from .venv, synced to
# uv.lock first (device-wheels.sh reads them there), so an earlier fill's others are dropped.
uv sync -q --locked
rm -f .whl/apache_tvm_ffi-*.whl .whl/nvidia_cutlass-*.whl .whl/pydantic-*.whl .whl/pydantic_core-*.whl \
  .whl/annotated_types-*.whl .whl/typing_inspection-*.whl
if [ -x ../shared/tools/device-wheels.sh ]; then
  ../shared/tools/device-wheels.sh >/dev/null
else
  for p in apache-tvm-ffi nvidia-cutlass==4.2.0.0 pydantic pydantic-core annotated-types typing-inspection; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d .whl "$p"
  done
fi
# pytest-xdist: scripts/gpu-tests.sh runs the suite across processes, so the nvcc builds of its
# modules run in parallel on the GPU machine's cores.
python3 -m pip download -q --no-deps --only-binary=:all: -d .whl pytest-xdist execnet
rm -f .whl/tilefoundry*.whl
uv build -q --all-packages --wheel -o .whl
ls .whl
