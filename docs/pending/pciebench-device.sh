#!/bin/bash
# pciebench-device.sh: branch pciebench's GPU call. Decode runs a pinned miss's experts
# "mapped": the MoE kernels read them in the registered arena over PCIe. The branch times
# that against copying them into VRAM first (BenchmarkPinnedExperts, engine/compute/gpu)
# for 1, 3 and 8 experts of qwen3next-80b-a3b (IQ3_XXS, hidden 2048, ffn 512) and
# qwen3moe 30b-a3b (Q4_K, hidden 2048, ffn 768): paths mapped, copy (WriteSlots), copy-direct
# (one cuMemcpyHtoDAsync per matrix from the arena), copy-blob (one per expert) and vram (the
# MoE alone on VRAM slots). No kernel changes: the tree's fatbin is the one to run.
# Run from the repository root on the GPU machine, carrying devbin/pcb (ignored by git),
# made where Go is:
#   bash /work/main/devbin/build.sh /work/wt/pciebench /tmp/pcb engine/compute/gpu   # empty embedded fatbin
#   mkdir -p devbin/pcb && xz -6 -c /tmp/pcb/gpu.test > devbin/pcb/gpu.test.xz
# It runs TestPinnedExpertsCopyMatchesMapped (the copy paths give the mapped outputs), then
# the benchmark 200 steps a case, 3 times, and a table of us/op per case. About 100 s;
# stays within 200 s.
set -u
T0=$(date +%s); el(){ echo "[$(($(date +%s)-T0))s] $*"; }
R=$(pwd); W=/tmp/w; mkdir -p /tmp/m $W
xz -dc $R/devbin/pcb/gpu.test.xz > /tmp/m/gpu.test && chmod +x /tmp/m/gpu.test
export STRATA_CUDA_FATBIN=$R/cuda/kernels.fatbin.gz
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
cd $R/engine/compute/gpu
timeout -k 5 45 /tmp/m/gpu.test -test.count=1 -test.v -test.timeout 40s \
	-test.run '^TestPinnedExpertsCopyMatchesMapped$' > $W/test.log 2>&1; echo "rc=$?" >> $W/test.log
cat $W/test.log; el "test done"
timeout -k 5 140 /tmp/m/gpu.test -test.run '^$' -test.bench PinnedExperts -test.benchtime 200x \
	-test.count 3 -test.timeout 135s > $W/bench.log 2>&1; echo "rc=$?" >> $W/bench.log
grep -E '^Benchmark|FAIL|panic|rc=' $W/bench.log
# One line a case: the three runs' us/op and the best run's MB/s of expert weights.
echo "== case: us/op of each run; best MB/s"
awk '/^BenchmarkPinnedExperts\// {
	name = $1; sub(/^BenchmarkPinnedExperts\//, "", name); sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) { if ($(i+1) == "us/op") us = $i; if ($(i+1) == "MB/s") mb = $i }
	if (!(name in runs)) order[n++] = name
	runs[name] = runs[name] " " us
	if (mb > best[name]) best[name] = mb
}
END { for (i = 0; i < n; i++) printf "%-44s %-26s %s\n", order[i], runs[order[i]], best[order[i]] }' $W/bench.log
el "benchmark done"
if [ -n "${OUT:-}" ]; then cat $W/test.log $W/bench.log | xz -T4 > "$OUT/logs.txt.xz"; fi
el done
