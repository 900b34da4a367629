#!/usr/bin/env bash
# Everything the GPU machine runs, in one call (see ../shared/gpu/README.md):
#   bash benchmarks/gpu.sh [tests] [bench] [-- extra args for benchmarks.run]
# Needs ./.whl (bash ../shared/gpu/fetch-wheels.sh) and, for the SNAP tests, ./.data with the
# datasets; both git-ignored and named in the device tool's `carry`. Logs and JSON lines go to $OUT.
# The copy there has no current git HEAD: prefix the call with GRAPHJOBS_COMMIT=<hash> to record it.
set -uo pipefail
OUT=${OUT:-/tmp/graphjobs-out}
mkdir -p "$OUT"
what=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do what+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#what[@]} -eq 0 ] && what=(tests bench)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 GRAPHJOBS_DATASETS=$PWD/.data NUMBA_CACHE_DIR=/tmp/numba-cache
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import cupy, numba, numpy, dask, distributed; print('cupy', cupy.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'dask', dask.__version__)"
status=0
for w in "${what[@]}"; do
  case $w in
    tests) python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu-tests.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    alltests) python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$OUT/all-tests.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    bench) python3 -m benchmarks.run --device gpu --out "$OUT/bench-gpu.jsonl" "$@" 2>&1 | tee "$OUT/bench-gpu.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    *) echo "unknown step $w"; exit 2 ;;
  esac
done
exit $status
