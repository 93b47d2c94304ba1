#!/bin/bash
# mma256-device.sh: branch mma256's GPU call. The branch adds tensor-core decode attention
# for head size 256 (attention_decode_mma_256, _int8_256: Qwen3-Next / Qwen3.5) and makes
# cuda.AttentionDecodeMMAFits(256) true; the hd<=128 decode kernels now share their block
# geometry with it (same logic, code reordered). The branch's binaries list the two new
# kernels, so they cannot load main's fatbin: main's kernels run under main's cuda.test.
# Run from the repository root on the GPU machine, carrying devbin/m256 (ignored by git),
# made where Go and an nvcc are:
#   bash /work/main/devbin/build.sh /work/wt/mma256 /tmp/m256 cuda engine/compute/gpu   # empty embedded fatbin
#   git -C /work/wt/mma256 archive main | (mkdir -p /tmp/m256src && tar x -C /tmp/m256src)
#   bash /work/main/devbin/build.sh /tmp/m256src /tmp/m256main cuda                  # main's cuda.test, for the A/B
#   mkdir -p devbin/m256 && for f in cuda.test gpu.test; do xz -6 -c /tmp/m256/$f > devbin/m256/$f.xz; done
#   xz -6 -c /tmp/m256main/cuda.test > devbin/m256/main-cuda.test.xz
#   make -C cuda/kernels OUT=/tmp/k90 ARCHS=90 PTX=90 NVCC=/work/cuda13/bin/nvcc && cp /tmp/k90/kernels.fatbin.gz devbin/m256/k90.fatbin.gz
#   git show main:cuda/kernels.fatbin.gz > devbin/m256/main.fatbin.gz
#   tar cJf devbin/m256/fixtures.tar.xz -C /work/shared/fixtures .
# It runs cuda's attention tests and engine/compute/gpu's tests on the branch's kernels,
# builds the full fatbin into $OUT/k (commit it with its kernels.sha256), then times
# BenchmarkAttentionDecode: at head size 256 the old kernel (kv=f16, kv=int8) against the
# new one (kv=f16-mma, kv=int8-mma) on the branch's kernels, and at 128 the mma cases on
# main's binary and kernels against the branch's, alternated. Land only if the tests pass,
# the 256 mma cases beat the old kernel, and no 128 case is slower beyond the run-to-run spread.
set -u
T0=$(date +%s); el(){ echo "[$(($(date +%s)-T0))s] $*"; }
R=$(pwd); D=$R/devbin/m256; mkdir -p /tmp/m /tmp/w /tmp/fx "$OUT/k"
for f in cuda.test gpu.test main-cuda.test; do xz -dc $D/$f.xz > /tmp/m/$f && chmod +x /tmp/m/$f; done
tar xJf $D/fixtures.tar.xz -C /tmp/fx && export STRATA_FIXTURES=/tmp/fx
OLD=$D/main.fatbin.gz; NEW=$D/k90.fatbin.gz
(timeout 450 make -C cuda/kernels OUT="$OUT/k" > /tmp/w/full.log 2>&1; echo "rc=$?" >> /tmp/w/full.log) &
FULL=$!
export STRATA_CUDA_FATBIN=$NEW
(cd cuda && timeout 300 /tmp/m/cuda.test -test.v -test.count=1 -test.run 'Attention' > /tmp/w/cuda.log 2>&1; echo "rc=$?" >> /tmp/w/cuda.log)
(cd engine/compute/gpu && timeout 300 /tmp/m/gpu.test -test.v -test.count=1 > /tmp/w/gpu.log 2>&1; echo "rc=$?" >> /tmp/w/gpu.log)
for f in cuda gpu; do
	l=/tmp/w/$f.log
	echo "== $f.test: $(tail -1 $l); $(grep -c '^--- PASS' $l) passed, $(grep -c -- '--- FAIL' $l) failed"
	grep -E -A12 -- '--- FAIL' $l | grep -E -- '--- FAIL|_test.go:[0-9]+:' | head -12
done
grep -E 'mma hd=256 window=.* pos [0-9]+ head 0:' /tmp/w/cuda.log | head -8 # the long-context errors at 256
el "tests done; the full fatbin (no benchmarks while it builds)"
wait $FULL; tail -1 /tmp/w/full.log; rm -f "$OUT/k/kernels.fatbin"
kb() { # kb LABEL BINARY FATBIN PATTERN
	(cd cuda && STRATA_CUDA_FATBIN=$3 timeout 200 $2 -test.run '^$' -test.bench "$4" -test.benchtime 200x > /tmp/w/kb-$1.log 2>&1)
	echo "== $1"; grep -E '^Benchmark|FAIL' /tmp/w/kb-$1.log | awk '{printf "%s", $1; for (i=2;i<=NF;i++) if ($(i+1) ~ /us\/op/) printf " %s %s", $i, $(i+1); print ""}'
}
# the engine's span counts: 264 for 16/2 heads, 132 for 32/4
P256='AttentionDecode/hd=256/kv=/ctx=(600|32768|131072)/splits=264$'
P128='AttentionDecode/kv=.*mma/ctx=(600|32768|131072)/splits=132$'
kb hd256 /tmp/m/cuda.test "$NEW" "$P256"
kb main128 /tmp/m/main-cuda.test "$OLD" "$P128"; kb branch128 /tmp/m/cuda.test "$NEW" "$P128"
kb hd256-2 /tmp/m/cuda.test "$NEW" "$P256"
kb main128-2 /tmp/m/main-cuda.test "$OLD" "$P128"; kb branch128-2 /tmp/m/cuda.test "$NEW" "$P128"
cat /tmp/w/*.log | xz -T4 > "$OUT/logs.txt.xz"
el done
