#!/usr/bin/env bash
# Fetches RAPIDS for the GPU machine, which cannot install it itself (no network) and takes at most
# 64 MiB per call. Two sets of wheels (CUDA 13, Python 3.12), each tarred and split into 52 MB parts
# with a SUM file (part count, md5), all git-ignored:
#   ./.cg   cuGraph's core: pylibcugraph 26.10 and its libraries, with nvidia-nvjitlink >= 13.3 (the
#           image's 13.0 is too old for libcuvs). `gpu.sh cugraph` installs it for the benchmarks.
#   ./.cg2  cuDF, dask_cudf and cuGraph's Python layer with what they pin (numba < 0.65, numpy < 2.5,
#           raft-dask, ucxx). `gpu.sh rapids` installs it in a site of its own and runs the RAPIDS tests.
# Carry one part per call running `bash benchmarks/gpu.sh stash`, then the SUM files with a call
# running `gpu.sh cugraph [rapids] ...`, all while the machine stays warm (see ../shared/gpu/README.md).
set -euo pipefail
top=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
get() {  # get DIR WHEEL-SPEC...
  local dir=$1; shift
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat -d "$dir" "$@"
}
pack() {  # pack DIR NAME: DIR's wheels into ./NAME/pNN and ./NAME/SUM
  rm -rf "${top:?}/$2" && mkdir -p "$top/$2"
  (cd "$1" && tar cf ../"$2".tar ./*.whl)
  split -b 52000000 -d -a 2 "$1/../$2.tar" "$top/$2/p"
  printf 'parts %s\nmd5 %s\n' "$(ls "$top/$2" | wc -l)" "$(md5sum < "$1/../$2.tar" | cut -d' ' -f1)" > "$top/$2/SUM"
  echo "$2: $(cat "$top/$2/SUM" | tr '\n' ' ')"
}
mkdir -p "$tmp/cg" "$tmp/cg2"
get "$tmp/cg" "pylibcugraph-cu13==26.10.*" "libcugraph-cu13==26.10.*" "libcuvs-cu13==26.10.*" "libraft-cu13==26.10.*" \
  "librmm-cu13==26.10.*" "libkvikio-cu13==26.10.*" "rapids-logger==0.3.*" "rmm-cu13==26.10.*" \
  "pylibraft-cu13==26.10.*" "nvidia-nvjitlink>=13.3"
get "$tmp/cg2" "cudf-cu13==26.10.*" "pylibcudf-cu13==26.10.*" "libcudf-cu13==26.10.*" "nvidia-libnvcomp-cu13==5.3.0.16" \
  "dask-cudf-cu13==26.10.*" "rapids-dask-dependency==26.10.*" "cugraph-cu13==26.10.*" "raft-dask-cu13==26.10.*" \
  "ucxx-cu13==0.52.*" "libucxx-cu13==0.52.*" "libucx-cu13" "distributed-ucxx-cu13==0.52.*" "numba<0.65" \
  "llvmlite<0.47" "numpy<2.5" "numba-cuda<0.31" numba-cuda-mlir cuda-bindings cuda-pathfinder cuda-core nvtx \
  cachetools rich markdown-it-py mdurl pygments lazy-importer narwhals
pack "$tmp/cg" .cg
pack "$tmp/cg2" .cg2
