#!/usr/bin/env bash
# Fetches cuGraph's core (pylibcugraph 26.10, cu13, Python 3.12) and its libraries for the GPU machine,
# which cannot install them itself (no network) and takes at most 64 MiB per call: the wheels are
# tarred and split into ./.cg/p00, p01, ... (52 MB each; git-ignored), with ./.cg/SUM (part count,
# md5). Carry one part per call running `bash benchmarks/gpu.sh stash`, then `.cg/SUM` with a call
# running `gpu.sh cugraph ...`, all while the machine stays warm (see ../shared/gpu/README.md).
# nvidia-nvjitlink >= 13.3 is included: the image's 13.0 is too old for libcuvs.
set -euo pipefail
top=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat -d "$tmp" \
  "pylibcugraph-cu13==26.10.*" "libcugraph-cu13==26.10.*" "libcuvs-cu13==26.10.*" "libraft-cu13==26.10.*" \
  "librmm-cu13==26.10.*" "libkvikio-cu13==26.10.*" rapids-logger "rmm-cu13==26.10.*" "pylibraft-cu13==26.10.*" \
  "nvidia-nvjitlink>=13.3"
rm -rf "$top/.cg" && mkdir -p "$top/.cg"
(cd "$tmp" && tar cf cg.tar ./*.whl && split -b 52000000 -d -a 2 cg.tar "$top/.cg/p" \
  && printf 'parts %s\nmd5 %s\n' "$(ls "$top/.cg" | wc -l)" "$(md5sum < cg.tar | cut -d' ' -f1)" > "$top/.cg/SUM")
cat "$top/.cg/SUM"
