#!/bin/sh
# gpu_check.sh: the one call on the GPU machine. Builds an sm_90-only fatbin to test
# with, runs the GPU tests and benchmarks from bin/cuda/cuda.test (built beforehand with
# `go test -c -o bin/cuda/cuda.test ./cuda/`, since that machine has no Go), and builds the
# full fatbin (`make kernels`) meanwhile. Results land in $OUT.
# Knobs: RUN / BENCH (test and benchmark patterns, BENCH=none skips), FULL=0 skips the full build.
set -u
OUT=${OUT:-/tmp/strata-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
echo "nvcc archs: $(nvcc --list-gpu-arch | tr '\n' ' ')"
if ! (cd cuda/kernels && make OUT=/tmp/k90 ARCHS=90 PTX=90 NVFLAGS="-O3 -std=c++17 -Xptxas -v") >"$OUT/build90.log" 2>&1; then
	grep -E "error|warning" "$OUT/build90.log" | head -40
	exit 1
fi
grep -E "spill" "$OUT/build90.log" | grep -v " 0 bytes spill stores, 0 bytes spill loads" | head -10
BG=
if [ "${FULL:-1}" = 1 ]; then
	(start=$(date +%s); make kernels OUT="$OUT"; echo "full build seconds: $(($(date +%s) - start))") >"$OUT/build.log" 2>&1 &
	BG=$!
fi
export STRATA_FIXTURES="$PWD/bin/cuda/fixtures" STRATA_CUDA_FATBIN=/tmp/k90/kernels.fatbin.gz
cd cuda || exit 1
timeout 240 ../bin/cuda/cuda.test -test.v -test.count=1 -test.run "${RUN:-.}" >"$OUT/test.log" 2>&1
echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|panic|_test.go:[0-9]+:" "$OUT/test.log" | head -60
if [ "${BENCH:-.}" != none ]; then
	timeout 240 ../bin/cuda/cuda.test -test.run '^$' -test.bench "${BENCH:-.}" -test.benchtime 100x >"$OUT/bench.log" 2>&1
	echo "bench rc=$?"
	grep -E "^Benchmark|FAIL|panic" "$OUT/bench.log"
fi
if [ -n "$BG" ]; then
	wait "$BG"
	echo "full build rc=$?"
	grep -E "error|seconds" "$OUT/build.log" | head -20
fi
ls -la "$OUT"
