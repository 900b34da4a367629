#!/usr/bin/env bash
# Everything the GPU machine runs, in one call (see ../shared/gpu/README.md):
#   bash benchmarks/gpu.sh [stash] [cugraph] [rapids] [tests] [gputest FILES] [democheck] [copyrate]
#                          [memory] [basebench] [bench] [nxbench] [-- args for benchmarks.run]
# memory: each job's device memory estimate beside its measured peak (benchmarks/memory.py), at the R-MAT
#   scales $MEMORY_SCALES (default 20,22), for the jobs $MEMORY_JOBS (default all).
# copyrate: the GPU's device-to-device copy rate, measured here (bytes read + written per second).
# basebench: benchmarks.run with the same args on an earlier tree unpacked in ./.base (git-ignored;
#   BASE_COMMIT names it in the results:
#   git archive --prefix=.base/ COMMIT | tar x), so that its figures stand beside bench's in one run.
# nxbench: nx.pagerank(G, backend="graphjobs") on the CPU and the GPU beside networkx.pagerank and
#   nx-cugraph (where installed) on a 10.8M-edge R-MAT graph (benchmarks/nx_backend.py).
# The tree is not installed here: NetworkX finds the graphjobs backend through its entry points, written
#   into /tmp/site as a .dist-info (benchmarks.nx_backend.register) before any step.
# democheck: every demo job on all visible GPUs and on one, outputs compared (benchmarks/compare_demo.py).
# Needs ./.whl (bash ../shared/gpu/fetch-wheels.sh) and, for the SNAP tests, ./.data with the
# datasets; both git-ignored and named in the device tool's `carry`. Logs and JSON lines go to $OUT.
# The copy there has no current git HEAD: prefix the call with GRAPHJOBS_COMMIT=<hash> to record it.
# cuGraph (pylibcugraph) is too large for one call: benchmarks/fetch-cugraph.sh splits its wheels into
# ./.cg/pNN parts; each call carrying some of them runs `stash` (kept in /tmp while the machine stays
# warm), and `cugraph` installs them once all parts of .cg/SUM are there, so later steps measure it.
# Likewise ./.cg2 (cuDF, dask_cudf, cuGraph's Python layer): `rapids` runs the RAPIDS interop tests.
# STEP_TIMEOUT=SECONDS bounds each Python step (gputest, tests, memory, bench, basebench, nxbench): past it
# the step gets SIGINT, so its traceback shows where it was, and the steps after it still run.
set -uo pipefail
OUT=${OUT:-/tmp/graphjobs-out}
mkdir -p "$OUT"
what=() files=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in *.py|*::*) files+=("$1") ;; *) what+=("$1") ;; esac; shift
done
[ "${1:-}" = "--" ] && shift
[ ${#what[@]} -eq 0 ] && what=(tests bench)
stash() {
  mkdir -p /tmp/cg-parts /tmp/cg2-parts
  cp .cg/p[0-9][0-9] /tmp/cg-parts/ 2>/dev/null; cp .cg2/p[0-9][0-9] /tmp/cg2-parts/ 2>/dev/null
  echo "cuGraph parts here: $(ls /tmp/cg-parts | wc -l) of $(awk '/^parts/ {print $2}' .cg/SUM 2>/dev/null)," \
       "RAPIDS parts: $(ls /tmp/cg2-parts | wc -l) of $(awk '/^parts/ {print $2}' .cg2/SUM 2>/dev/null)"
}
unpack() {  # unpack PARTS_DIR SUM_FILE SITE: the wheels of the parts, installed into SITE once
  local want sum
  want=$(awk '/^parts/ {print $2}' "$2"); sum=$(awk '/^md5/ {print $2}' "$2")
  [ -d "$3" ] && return 0
  [ "$(ls "$1" | wc -l)" = "$want" ] || { echo "parts missing in $1"; return 1; }
  cat "$1"/p* > /tmp/parts.tar && [ "$(md5sum < /tmp/parts.tar | cut -d' ' -f1)" = "$sum" ] \
    || { echo "checksum of $1 differs"; return 1; }
  rm -rf /tmp/whl-unpack && mkdir -p /tmp/whl-unpack && tar xf /tmp/parts.tar -C /tmp/whl-unpack && rm /tmp/parts.tar
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$3" /tmp/whl-unpack/*.whl
}
cugraph() {
  stash
  local site=/tmp/cg-site
  unpack /tmp/cg-parts .cg/SUM $site || return 1
  export PYTHONPATH=$PYTHONPATH:$site
  local libs=$site/nvidia/cu13/lib
  for d in libcugraph libcuvs libraft librmm libkvikio rapids_logger; do libs=$libs:$site/$d/lib64; done
  for d in $(python3 -c "import site; print(' '.join(site.getsitepackages()))"); do  # the image's CUDA wheels
    [ -d "$d/nvidia/cu13/lib" ] && libs=$libs:$d/nvidia/cu13/lib
  done
  [ -d /usr/local/cuda/lib64 ] && libs=$libs:/usr/local/cuda/lib64
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # CuPy loads the image's nvJitLink 13.0 first when imported first; libcuvs needs the shipped 13.5
  export LD_PRELOAD=$site/nvidia/cu13/lib/libnvJitLink.so.13${LD_PRELOAD:+:$LD_PRELOAD}
  python3 -c "import pylibcugraph; print('pylibcugraph', pylibcugraph.__version__)"
}
# cuDF, dask_cudf and cuGraph's Python layer: they pin numba < 0.65 and so numpy < 2.5, older than the
# image's, so they get their own site, first on the path, for the RAPIDS tests only (after `cugraph`)
rapids() {
  stash > /dev/null
  local site=/tmp/rapids-site
  unpack /tmp/cg2-parts .cg2/SUM $site || return 1
  (
    export PYTHONPATH=$site:$PYTHONPATH
    export LD_LIBRARY_PATH=$site/libcudf/lib64:$site/nvidia/libnvcomp/lib64:$site/libucx/lib:$site/libucxx/lib64:$LD_LIBRARY_PATH
    python3 -c "import numpy, numba, cudf, dask_cudf, cugraph; print('numpy', numpy.__version__, 'numba', numba.__version__, 'cudf', cudf.__version__, 'cugraph', cugraph.__version__)" || exit 1
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/graphs/test_rapids.py tests/graphs/test_interop.py \
      tests/graphs/test_load.py 2>&1 | tee "$OUT/rapids-tests.log"; exit "${PIPESTATUS[0]}"
  )
}
if [ "${what[*]}" = stash ]; then stash; exit 0; fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 GRAPHJOBS_DATASETS=$PWD/.data NUMBA_CACHE_DIR=/tmp/numba-cache
python3 -c "from benchmarks.nx_backend import register; register('/tmp/site')" || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import cupy, numba, numpy, dask, distributed; print('cupy', cupy.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'dask', dask.__version__)"
guard() {  # the command, under STEP_TIMEOUT when set
  if [ -n "${STEP_TIMEOUT:-}" ]; then timeout --signal=INT --kill-after=30 "$STEP_TIMEOUT" "$@"; else "$@"; fi
}
status=0
for w in "${what[@]}"; do
  case $w in
    stash) stash ;;
    cugraph) cugraph || status=1 ;;
    rapids) rapids || status=1 ;;
    gputest) guard python3 -m pytest -q -m gpu -p no:cacheprovider "${files[@]}" 2>&1 | tee -a "$OUT/gpu-tests.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    tests)  # the GPU tests, then nvcc's spill check of every kernel source (nvcc is there too; not marked gpu)
      guard python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu-tests.log"; status=$((status | ${PIPESTATUS[0]}))
      python3 -m pytest -q -p no:cacheprovider tests/operators/test_kernels_compile.py -k spills 2>&1 \
        | tee -a "$OUT/gpu-tests.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    democheck)
      python3 -m pipelines demo --device gpu --out /tmp/demo-all --workdir /tmp/demo-wd-all > "$OUT/demo-all.log" 2>&1 \
        && CUDA_VISIBLE_DEVICES=0 python3 -m pipelines demo --device gpu --workers 1 --out /tmp/demo-one \
          --workdir /tmp/demo-wd-one > "$OUT/demo-one.log" 2>&1 \
        && python3 -m benchmarks.compare_demo /tmp/demo-all /tmp/demo-one --allow-differing 0.002 | tee "$OUT/democheck.log"
      status=$((status | ${PIPESTATUS[0]})) ;;
    alltests) python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$OUT/all-tests.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    copyrate) python3 -c "from benchmarks.common import copy_rate
print(f'device-to-device copy: {copy_rate() / 1e12:.2f} TB/s (bytes read + written)')" 2>&1 | tee "$OUT/copyrate.log" ;;
    basebench) (cd .base && GRAPHJOBS_COMMIT=${BASE_COMMIT:-base} PYTHONPATH=/tmp/site:$PWD guard python3 -m benchmarks.run --device gpu --out "$OUT/bench-base.jsonl" "$@") \
        2>&1 | tee "$OUT/bench-base.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    memory) guard python3 -m benchmarks.memory --out "$OUT/memory.jsonl" --scales "${MEMORY_SCALES:-20,22}" \
        ${MEMORY_JOBS:+--jobs "$MEMORY_JOBS"} 2>&1 | tee "$OUT/memory.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    nxbench) guard python3 -m benchmarks.nx_backend --out "$OUT/nx-backend.jsonl" 2>&1 | tee "$OUT/nx-backend.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    bench) guard python3 -m benchmarks.run --device gpu --out "$OUT/bench-gpu.jsonl" "$@" 2>&1 | tee "$OUT/bench-gpu.log"; status=$((status | ${PIPESTATUS[0]})) ;;
    *) echo "unknown step $w"; exit 2 ;;
  esac
done
exit $status
