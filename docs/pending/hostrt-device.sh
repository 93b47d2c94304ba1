#!/bin/bash
# hostrt-device.sh MODE: branch hostrt's GPU calls. A tiered decode step waits on the host at
# every layer for the routes, then for the layer's input (two pageable downloads, two
# waits), and uploads the CPU's results from pageable memory. The branch reads both into a
# page-locked area with one wait (a decode layer with experts off the GPU reads its input
# first; the Read brings the routes along) and uploads through a page-locked area without
# waiting. No kernel changes: the committed fatbin serves both binaries.
# Carry devbin/h (ignored by git), made where Go is (devbin/build.sh: empty embedded fatbin):
#   bash devbin/build.sh "$PWD" /tmp/h strata engine/compute/gpu engine engine/experts
#   bash devbin/build.sh <a checkout of main> /tmp/hm strata            # main's binary, for the A/B
#   mkdir -p devbin/h && for f in strata gpu.test engine.test experts.test; do xz -6 -c /tmp/h/$f > devbin/h/$f.xz; done
#   xz -6 -c /tmp/hm/strata > devbin/h/strata-main.xz; cp <fixtures tarball> devbin/h/fixtures.tar.xz
#   MODE tests: engine/compute/gpu's tests, the engine's and experts' GPU tests (fixtures).
#   MODE bench: q30 (synth 30b-a3b q4_k zipf 1) tiered at --vram-budget-mib 9700, main's binary
#     and the branch's alternated, two rounds, with decode_host_us_per_token and hit rates.
set -u
MODE=${1:-tests}
T0=$(date +%s); el(){ echo "[$(($(date +%s)-T0))s] $*"; }
R=$(pwd); mkdir -p /tmp/h /tmp/w "$OUT"
for f in devbin/h/*.xz; do b=$(basename $f .xz); [ "$b" = fixtures.tar ] && continue; xz -dc $f > /tmp/h/$b && chmod +x /tmp/h/$b; done
export STRATA_CUDA_FATBIN=$R/cuda/kernels.fatbin.gz
case $MODE in
tests)
	mkdir -p /tmp/fx && tar xJf devbin/h/fixtures.tar.xz -C /tmp/fx && export STRATA_FIXTURES=/tmp/fx
	(cd engine/compute/gpu && timeout 300 /tmp/h/gpu.test -test.v -test.count=1 > /tmp/w/gpu.log 2>&1; echo "rc=$?" >> /tmp/w/gpu.log)
	(cd engine && timeout 240 /tmp/h/engine.test -test.v -test.count=1 -test.run 'GPU|Gpu|CUDA|Cuda|Tier|Helper|StandIn|Pinned|Planned|Hybrid|GptOss' > /tmp/w/engine.log 2>&1; echo "rc=$?" >> /tmp/w/engine.log)
	(cd engine/experts && timeout 200 /tmp/h/experts.test -test.v -test.count=1 > /tmp/w/experts.log 2>&1; echo "rc=$?" >> /tmp/w/experts.log)
	for f in gpu engine experts; do
		l=/tmp/w/$f.log
		echo "== $f.test: $(tail -1 $l); $(grep -c '^--- PASS' $l) passed, $(grep -c -- '--- FAIL' $l) failed, $(grep -c -- '--- SKIP' $l) skipped"
		grep -E -A12 -- '--- FAIL' $l | grep -E -- '--- FAIL|_test.go:[0-9]+:' | head -16
	done
	;;
bench)
	Q=/dev/shm/q30.gguf
	/tmp/h/strata synth --preset 30b-a3b --quant q4_k --zipf 1 -o $Q > /tmp/w/synth.log 2>&1 || { tail -3 /tmp/w/synth.log; exit 1; }
	sb() { local label=$1 bin=$2; shift 2
		timeout 120 $bin bench -m $Q --backend cuda --json "$@" 2>> /tmp/w/sb.err | sed "s/^{/{\"label\":\"$label\",/" | tee -a "$OUT/bench.jsonl" | python3 -c '
import json, sys
for l in sys.stdin:
    j = json.loads(l); c = j.get("expert_cache") or {}
    print("  %s: prefill %.1f, decode %.1f %s hits %s host/token %s" % (j["label"], j["prefill_tokens_per_s"], j["decode_tokens_per_s"], [round(x, 1) for x in j.get("decode_tokens_per_s_runs", [])], {k: round(v, 3) for k, v in (j.get("decode_hit_rate") or {}).items()}, c.get("decode_host_us_per_token")))'; }
	for round in 1 2; do
		sb "main r$round" /tmp/h/strata-main --vram-budget-mib 9700 --prompt 512 --decode 128 --repeat 2
		sb "hostrt r$round" /tmp/h/strata --vram-budget-mib 9700 --prompt 512 --decode 128 --repeat 2
	done
	;;
esac
cat /tmp/w/*.log /tmp/w/*.err 2>/dev/null | xz -T4 > "$OUT/logs.txt.xz"
el done
