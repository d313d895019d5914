#!/usr/bin/env bash
# bench/micro.sh - builds and runs every micro-benchmark in bench/micro/ and prints their lines.
#   bench/micro.sh               build/ (configured if needed), each program pinned to CPU 1
#   bench/micro.sh build-bench   another build folder
#   MICRO_CPU=0 bench/micro.sh   another CPU; JOBS=1 bench/micro.sh builds on one core
# Each program takes its own optional arguments (see its header comment); run one by hand for
# more repetitions: build/bench/micro_hist 20000000 21. Figures: not pass/fail; ctest skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cpu=${MICRO_CPU:-1}
names=()
for f in bench/micro/*.c; do names+=("$(basename "$f" .c)"); done

# Configure again so a new bench/micro/*.c is globbed in; keep the folder's build type.
if [ -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" >/dev/null
else
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j"${JOBS:-$(nproc)}" --target "${names[@]}" >/dev/null

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
echo "# machine: ${model:-unknown CPU}, $(nproc) CPUs, Linux $(uname -r);" \
  "$build ($type), pinned to CPU $cpu"
for n in "${names[@]}"; do
  echo "## $n"
  taskset -c "$cpu" "$build/bench/$n"
done
