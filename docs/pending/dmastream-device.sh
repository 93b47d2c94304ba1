#!/bin/bash
# dmastream-device.sh: branch dmastream's GPU call. The branch makes WriteSlots copy a
# source that lies in registered host memory (the pinned expert arena) into its VRAM slot
# by DMA straight from it, instead of through the staging ring, and wait for those copies
# before it returns. No kernel changes: the tree's fatbin is the one to run.
# Run from the repository root on the GPU machine, carrying devbin/dma (ignored by git),
# made where Go is:
#   bash /work/main/devbin/build.sh /work/wt/dmastream /tmp/dma engine/compute/gpu engine/experts   # empty embedded fatbin
#   mkdir -p devbin/dma && for f in gpu.test experts.test; do xz -6 -c /tmp/dma/$f > devbin/dma/$f.xz; done
#   tar cJf devbin/dma/fixtures.tar.xz -C /work/shared/fixtures .
# It runs engine/compute/gpu's tests (TestWriteSlots*: registered, plain and mixed
# sources, the copy-before-return contract, bad writes), BenchmarkWriteSlots (64 experts of
# 1.2 MiB, src=staged against src=registered; 3 runs each), then engine/experts' tests (the
# cache's fills, streams and adaptive swaps on the GPU). Land if the tests pass and
# src=registered is faster. Stays within about 470 s.
set -u
T0=$(date +%s); el(){ echo "[$(($(date +%s)-T0))s] $*"; }
R=$(pwd); D=$R/devbin/dma; W=/tmp/w; mkdir -p /tmp/m $W /tmp/fx
for f in gpu.test experts.test; do xz -dc $D/$f.xz > /tmp/m/$f && chmod +x /tmp/m/$f; done
tar xJf $D/fixtures.tar.xz -C /tmp/fx && export STRATA_FIXTURES=/tmp/fx
export STRATA_CUDA_FATBIN=$R/cuda/kernels.fatbin.gz
run() { # run NAME DIR SECONDS ARGS...: one test binary, its log in $W/NAME.log
	local name=$1 dir=$2 s=$3; shift 3
	(cd "$dir" && timeout -k 5 "$s" /tmp/m/$name.test -test.count=1 -test.timeout "$((s - 10))s" "$@" > $W/$name.log 2>&1; echo "rc=$?" >> $W/$name.log)
}
report() { # report NAME: pass/fail counts and the failures
	local l=$W/$1.log
	echo "== $1: $(tail -1 $l); $(grep -c -- '--- PASS' $l) passed, $(grep -c -- '--- SKIP' $l) skipped, $(grep -c -- '--- FAIL' $l) failed (subtests included)"
	grep -E -A12 -- '--- FAIL|^panic:' $l | grep -E -- '--- FAIL|_test.go:[0-9]+:|^panic:' | head -20
}
run gpu engine/compute/gpu 220 -test.v; report gpu; el "gpu tests done"
(cd engine/compute/gpu && timeout -k 5 50 /tmp/m/gpu.test -test.run '^$' -test.bench WriteSlots -test.benchtime 20x -test.count 3 > $W/gpu-bench.log 2>&1; echo "rc=$?" >> $W/gpu-bench.log)
echo "== BenchmarkWriteSlots: $(tail -1 $W/gpu-bench.log)"; grep -E '^Benchmark|FAIL|panic' $W/gpu-bench.log
el "benchmark done"
run experts engine/experts 200 -test.v; report experts; el "experts tests done"
if [ -n "${OUT:-}" ]; then cat $W/*.log | xz -T4 > "$OUT/logs.txt.xz"; fi
el done
