#!/bin/bash
# mmashare-device.sh: branch mmashare's GPU call. The prefill and decode tensor-core attention
# kernels share their tile step (fa_tile_step), their query fragments (fa_q_frags) and their
# tile load (fa_load_tile); no kernel is renamed, so main's and the branch's fatbins run under
# the same binaries. Run from the repository root on the GPU machine, carrying devbin/m (ignored
# by git), made where Go and an nvcc are:
#   bash devbin/build.sh "$PWD" /tmp/m cuda engine/compute/gpu      # empty embedded fatbin
#   mkdir -p devbin/m && for f in cuda.test gpu.test; do xz -6 -c /tmp/m/$f > devbin/m/$f.xz; done
#   make -C cuda/kernels OUT=/tmp/k90 ARCHS=90 PTX=90 && cp /tmp/k90/kernels.fatbin.gz devbin/m/k90.fatbin.gz
#   git show main:cuda/kernels.fatbin.gz > devbin/m/main.fatbin.gz   # main's kernels, for the A/B
#   cp <fixtures tarball> devbin/m/fixtures.tar.xz
# It runs cuda's attention tests and engine/compute/gpu's tests on the branch's kernels,
# builds the full fatbin into $OUT/k (commit it with its kernels.sha256), then times
# BenchmarkAttentionPrefill and BenchmarkAttentionDecode on main's and the branch's kernels,
# alternated. Land only if the tests pass and no case is slower beyond the run-to-run spread.
set -u
T0=$(date +%s); el(){ echo "[$(($(date +%s)-T0))s] $*"; }
R=$(pwd); mkdir -p /tmp/m /tmp/w /tmp/fx "$OUT/k"
for f in cuda.test gpu.test; do xz -dc devbin/m/$f.xz > /tmp/m/$f && chmod +x /tmp/m/$f; done
tar xJf devbin/m/fixtures.tar.xz -C /tmp/fx && export STRATA_FIXTURES=/tmp/fx
OLD=$R/devbin/m/main.fatbin.gz; NEW=$R/devbin/m/k90.fatbin.gz
(timeout 450 make -C cuda/kernels OUT="$OUT/k" > /tmp/w/full.log 2>&1; echo "rc=$?" >> /tmp/w/full.log) &
FULL=$!
export STRATA_CUDA_FATBIN=$NEW
(cd cuda && timeout 200 /tmp/m/cuda.test -test.v -test.count=1 -test.run 'Attention' > /tmp/w/cuda.log 2>&1; echo "rc=$?" >> /tmp/w/cuda.log)
(cd engine/compute/gpu && timeout 300 /tmp/m/gpu.test -test.v -test.count=1 > /tmp/w/gpu.log 2>&1; echo "rc=$?" >> /tmp/w/gpu.log)
for f in cuda gpu; do
	l=/tmp/w/$f.log
	echo "== $f.test: $(tail -1 $l); $(grep -c '^--- PASS' $l) passed, $(grep -c -- '--- FAIL' $l) failed"
	grep -E -A12 -- '--- FAIL' $l | grep -E -- '--- FAIL|_test.go:[0-9]+:' | head -12
done
el "tests done; the full fatbin (no benchmarks while it builds)"
wait $FULL; tail -1 /tmp/w/full.log; rm -f "$OUT/k/kernels.fatbin"
kb() { # kb LABEL FATBIN
	(cd cuda && STRATA_CUDA_FATBIN=$2 timeout 150 /tmp/m/cuda.test -test.run '^$' -test.bench 'AttentionPrefill|AttentionDecode/kv=.*mma/ctx=(600|32768|131072)/splits=132$' -test.benchtime 200x > /tmp/w/kb-$1.log 2>&1)
	echo "== $1"; grep -E '^Benchmark|FAIL' /tmp/w/kb-$1.log | awk '{printf "%s", $1; for (i=2;i<=NF;i++) if ($(i+1) ~ /us\/op/) printf " %s %s", $i, $(i+1); print ""}'
}
kb main "$OLD"; kb branch "$NEW"; kb main2 "$OLD"; kb branch2 "$NEW"
cat /tmp/w/*.log | xz -T4 > "$OUT/logs.txt.xz"
el done
