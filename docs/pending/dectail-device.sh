#!/bin/bash
# dectail-device.sh MODE: branch dectail's GPU calls (decode attention's short last chunk with its
# loads batched, argmax_f32 reading float4; and a build with -DDEC_V_UNROLL=4 beside them). Run from the repository root on the GPU machine.
# It expects, carried in devbin/t/ (ignored by git), binaries of this branch built with an empty
# embedded fatbin (the device has no Go), made where Go is:
#   bash devbin/build.sh "$PWD" /tmp/t strata cuda engine/compute/gpu engine   # (devbin/build.sh:
#   # copy cuda/kernels.fatbin.gz aside, truncate it, go build/go test -c, put it back)
#   mkdir -p devbin/t && for f in strata cuda.test gpu.test engine.test; do xz -6 -c /tmp/t/$f > devbin/t/$f.xz; done
# and optionally devbin/t/k90.fatbin.gz (make -C cuda/kernels OUT=... ARCHS=90 PTX=90 where an
# nvcc is; else it is built here, 100 s). The tree's own cuda/kernels.fatbin.gz is main's: the
# "old" kernels. No kernel is renamed, so the same binaries run either fatbin.
#   MODE tests: carry devbin/t with devbin/t/fixtures.tar.xz (or devbin/a/fixtures.tar.xz):
#     cuda's Attention and Argmax tests, all of engine/compute/gpu's, the engine's GPU tests on the
#     new kernels; the full fatbin (make kernels) into $OUT/k, to commit; then, once it is built,
#     BenchmarkAttentionDecode on the old and the new fatbin.
#   MODE bench: carry devbin/t and devbin/peer-bin (the peer's CUDA build, 3 parts): strata bench of
#     q30 (synth 30b-a3b q4_k zipf 1) at 512+64 and at 32k, old and new fatbin alternated, and the
#     peer's decode at the same depths (-p 0 -n 64 -d 512,32768), all in one call.
set -u
MODE=${1:-tests}
R=$(pwd); OUT=${OUT:-/tmp/dectail-out}
T0=$(date +%s); el(){ echo "[$(($(date +%s)-T0))s] $*"; }
mkdir -p /tmp/t /tmp/w "$OUT"
for f in strata cuda.test gpu.test engine.test; do
	[ -f devbin/t/$f.xz ] || { echo "devbin/t/$f.xz is missing: carry devbin/t"; exit 1; }
	xz -dc devbin/t/$f.xz > /tmp/t/$f && chmod +x /tmp/t/$f
done
OLD=$R/cuda/kernels.fatbin.gz
NEW=$R/devbin/t/k90.fatbin.gz
if [ ! -f "$NEW" ]; then
	el "building the sm_90 fatbin"
	make -C cuda/kernels OUT=/tmp/k90 ARCHS=90 PTX=90 > /tmp/w/k90.log 2>&1 || { tail -20 /tmp/w/k90.log; exit 1; }
	NEW=/tmp/k90/kernels.fatbin.gz
fi
S=/tmp/t/strata
# the value loop with 16 rows' loads in flight instead of 8 (-DDEC_V_UNROLL=4), to compare
NEW4=/tmp/k90u4/kernels.fatbin.gz
build4() { make -C cuda/kernels OUT=/tmp/k90u4 ARCHS=90 PTX=90 NVFLAGS="-O3 -std=c++17 --threads 0 -Xptxas -warn-spills -DDEC_V_UNROLL=4" > /tmp/w/k90u4.log 2>&1 || tail -5 /tmp/w/k90u4.log; }
kbench() { # kbench LABEL FATBIN
	(cd cuda && STRATA_CUDA_FATBIN=$2 timeout 120 /tmp/t/cuda.test -test.run '^$' -test.bench 'AttentionDecode/kv=(f16|int8)/ctx=(600|1024|32768)/' -test.benchtime 200x > /tmp/w/kb-$1.log 2>&1)
	echo "== BenchmarkAttentionDecode ($1)"; grep -E '^Benchmark|FAIL' /tmp/w/kb-$1.log
}
case $MODE in
tests)
	fx=devbin/t/fixtures.tar.xz; [ -f $fx ] || fx=devbin/a/fixtures.tar.xz
	[ -f $fx ] && mkdir -p /tmp/fx && tar xJf $fx -C /tmp/fx && export STRATA_FIXTURES=/tmp/fx
	(timeout 420 make -C cuda/kernels OUT="$OUT/k" > /tmp/w/full.log 2>&1; echo "rc=$?" >> /tmp/w/full.log; build4) &
	FULL=$!
	export STRATA_CUDA_FATBIN=$NEW
	(cd cuda && timeout 200 /tmp/t/cuda.test -test.v -test.count=1 -test.run 'Attention|Argmax' > /tmp/w/cuda.log 2>&1; echo "rc=$?" >> /tmp/w/cuda.log) &
	CT=$!
	(cd engine/compute/gpu && timeout 240 /tmp/t/gpu.test -test.v -test.count=1 > /tmp/w/gpu.log 2>&1; echo "rc=$?" >> /tmp/w/gpu.log) &
	GT=$!
	wait $CT $GT
	(cd engine && timeout 200 /tmp/t/engine.test -test.v -test.count=1 -test.run 'GPU|CUDA|Cuda|GptOss|Tiered|Activations' > /tmp/w/engine.log 2>&1; echo "rc=$?" >> /tmp/w/engine.log)
	for f in cuda gpu engine; do
		l=/tmp/w/$f.log
		echo "== $f.test: $(tail -1 $l); $(grep -c '^--- PASS' $l) top-level passed, $(grep -c -- '--- FAIL' $l) failed"
		grep -E -B1 -A8 -- '--- FAIL' $l | grep -E -- '--- FAIL|_test.go:[0-9]+:' | head -20
	done
	el "tests done; the full fatbin (no benchmarks while it builds)"
	wait $FULL; tail -1 /tmp/w/full.log; rm -f "$OUT/k/kernels.fatbin"
	kbench old "$OLD"; kbench new "$NEW"; kbench old2 "$OLD"; kbench new2 "$NEW"
	[ -f "$NEW4" ] && kbench new-unroll4 "$NEW4"
	;;
bench)
	mkdir -p /tmp/peer/lcp/build && cat devbin/peer-bin/peer-bin.tar.xz.* | xz -dc | tar xf - -C /tmp/peer/lcp/build
	export LD_LIBRARY_PATH=/tmp/peer/lcp/build/bin
	P=/tmp/peer/lcp/build/bin/llama-bench
	Q=/dev/shm/q30.gguf
	$S synth --preset 30b-a3b --quant q4_k --zipf 1 -o $Q > /tmp/w/synth.log 2>&1 &
	SY=$!
	build4
	wait $SY || { tail -3 /tmp/w/synth.log; exit 1; }
	sb() { local label=$1 fb=$2; shift 2
		STRATA_CUDA_FATBIN=$fb timeout 120 $S bench -m $Q --backend cuda --json "$@" 2>> /tmp/w/sb.err | sed "s/^{/{\"label\":\"$label\",/" | tee -a "$OUT/bench.jsonl" |
			python3 -c 'import json,sys
for l in sys.stdin:
    j = json.loads(l); print("  %s: prefill %.1f, decode %.1f %s" % (j["label"], j["prefill_tokens_per_s"], j["decode_tokens_per_s"], [round(x, 1) for x in j.get("decode_tokens_per_s_runs", [])]))'; }
	for round in 1 2; do
		sb "old 512 r$round" "$OLD" --prompt 512 --decode 64 --repeat 3
		sb "new 512 r$round" "$NEW" --prompt 512 --decode 64 --repeat 3
	done
	[ -f "$NEW4" ] && sb "new-unroll4 512" "$NEW4" --prompt 512 --decode 64 --repeat 3
	sb "old 32k" "$OLD" --max-context 33280 --prompt 32768 --decode 64
	sb "new 32k" "$NEW" --max-context 33280 --prompt 32768 --decode 64
	sb "new 32k int8" "$NEW" --max-context 33280 --prompt 32768 --decode 64 --kv int8
	timeout 150 $P -m $Q -o jsonl -fa 1 -ngl 99 -p 0 -n 64 -d 512,32768 -r 2 2> /tmp/w/peer.err | tee -a "$OUT/peer.jsonl" |
		python3 -c 'import json,sys,statistics
for l in sys.stdin:
    j = json.loads(l); ts = j.get("samples_ts") or [0]; print("  peer d%s: %.1f %s" % (j.get("n_depth"), statistics.median(ts), [round(x, 1) for x in ts]))'
	;;
esac
cat /tmp/w/*.log /tmp/w/*.err 2>/dev/null | xz -T4 > "$OUT/logs.txt.xz"
el done
