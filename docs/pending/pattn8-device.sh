#!/bin/bash
# pattn8-device.sh: branch pattn8's one call on the GPU machine (tensor-core prompt attention
# over the int8 KV cache, cuda.AttentionPrefillMMAInt8). Run it from the repository root there:
#   bash docs/pending/pattn8-device.sh
# It expects, carried in devbin/p/ (ignored by git), binaries of this branch built with an
# empty embedded fatbin (the device has no Go; the fatbin comes from STRATA_CUDA_FATBIN):
#   cuda.test.xz  gpu.test.xz  strata.xz  (and commit: the commit they were built from)
# made where Go is, in the repository root:
#   cp cuda/kernels.fatbin.gz /tmp/fb.keep && : > cuda/kernels.fatbin.gz
#   go test -c -ldflags=-s -o /tmp/p/cuda.test ./cuda
#   go test -c -ldflags=-s -o /tmp/p/gpu.test ./engine/compute/gpu
#   go build -tags nogui -ldflags=-s -o /tmp/p/strata .
#   cp /tmp/fb.keep cuda/kernels.fatbin.gz
#   mkdir -p devbin/p && for f in cuda.test gpu.test strata; do xz -6 -c /tmp/p/$f > devbin/p/$f.xz; done
#   git rev-parse HEAD > devbin/p/commit
# and the call carries devbin/p (run's carry: ["devbin/p"]), optionally with
# devbin/p/fixtures.tar.xz (else devbin/a/fixtures.tar.xz, shared/fixtures or
# $STRATA_FIXTURES; without any, the fixture tests skip).
# It does, within about 540 s:
#   1. make -C cuda/kernels OUT=/tmp/k90 ARCHS=90 PTX=90 (sm_90 only; what the tests and
#      benchmarks run through STRATA_CUDA_FATBIN), with strata synth of the 30b-a3b q4_k
#      model into /dev/shm meanwhile;
#   2. from the start, in the background, the full fatbin: make -C cuda/kernels OUT=$OUT/k
#      (to commit as cuda/kernels.fatbin.gz and cuda/kernels.sha256 if all passes); once the
#      sm_90 one is built, two more sm_90 builds with the int8 kernels' tile load unrolled by
#      2 and 4 (-DFA_I8_LOAD_UNROLL, attention_prefill.cu; the committed default is 1);
#   3. cuda.test -test.run Attention and gpu.test (all of it), printing FAIL lines and a
#      summary, then BenchmarkAttentionPrefill (every kernel, 512 tokens at the start of the
#      cache and at the end of a 32k one), and its kv=int8/mma cases on the unroll-2 and -4
#      builds;
#   4. strata bench --kv int8 of a 32,768-token prompt with the tensor-core kernel (unset) and
#      with STRATA_PREFILL_MMA=0 (the tiled one; 744 tok/s on main), then, if time is left,
#      the f16 cache's tensor-core run for comparison (3,411 tok/s on main).
# $OUT receives at most 5 files: k/kernels.fatbin.gz, k/kernels.sha256, bench.jsonl,
# logs.txt.xz, and summary.txt (what is printed).
set -u
R=$(pwd)
OUT=${OUT:-/tmp/pattn8-out}
mkdir -p "$OUT" /tmp/p /tmp/w
T0=$(date +%s)
DEADLINE=${DEADLINE:-540}
el() { echo "[$(($(date +%s) - T0))s] $*"; }
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
# lim N: N seconds, or what is left before the deadline if less (at least 1)
lim() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"; }
exec > >(tee "$OUT/summary.txt") 2>&1
TEE=$!

nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
echo "nvcc: $(nvcc --version | tail -1); cores: $(nproc); binaries of $(cat devbin/p/commit 2>/dev/null || echo 'an unrecorded commit')"
for f in cuda.test gpu.test strata; do
	if [ ! -f "devbin/p/$f.xz" ]; then
		echo "devbin/p/$f.xz is missing: carry devbin/p"
		exit 1
	fi
	xz -dc "devbin/p/$f.xz" > "/tmp/p/$f" && chmod +x "/tmp/p/$f"
done
S=/tmp/p/strata
if [ -n "${STRATA_FIXTURES:-}" ] && [ -d "$STRATA_FIXTURES" ]; then
	:
elif [ -f devbin/p/fixtures.tar.xz ] || [ -f devbin/a/fixtures.tar.xz ]; then
	fx=devbin/p/fixtures.tar.xz
	[ -f "$fx" ] || fx=devbin/a/fixtures.tar.xz
	mkdir -p /tmp/fx && tar xJf "$fx" -C /tmp/fx && export STRATA_FIXTURES=/tmp/fx
elif [ -d shared/fixtures ]; then
	export STRATA_FIXTURES=$R/shared/fixtures
else
	echo "no fixtures: the fixture tests skip"
fi
echo "fixtures: ${STRATA_FIXTURES:-none}"

# 1. the sm_90 fatbin; 2. the full one in the background (nvcc --threads 0 builds its
# architectures side by side, so it takes about as long as the sm_90 one), and the model
Q=/dev/shm/q30.gguf
# (timeout itself in the background, so that killing it stops what it runs)
timeout 300 $S synth --preset 30b-a3b --quant q4_k --zipf 1 -o $Q > /tmp/w/synth.log 2>&1 &
SYNTH=$!
timeout $DEADLINE make -C cuda/kernels OUT="$OUT/k" > /tmp/w/full.log 2>&1 &
FULL=$!
el "make k90"
timeout 300 make -C cuda/kernels OUT=/tmp/k90 ARCHS=90 PTX=90 > /tmp/w/k90.log 2>&1
rc=$?
el "k90 rc=$rc"
grep -E "error|warning" /tmp/w/k90.log | grep -v "^nvcc " | head -30
if [ $rc != 0 ] || [ ! -f /tmp/k90/kernels.fatbin.gz ]; then
	tail -20 /tmp/w/k90.log
	kill $SYNTH $FULL 2>/dev/null
	wait $SYNTH $FULL 2>/dev/null
	rm -f $Q "$OUT/k/kernels.fatbin"
	cat /tmp/w/*.log | xz -T4 > "$OUT/logs.txt.xz"
	exec >&- 2>&-
	wait $TEE
	exit 1
fi
export STRATA_CUDA_FATBIN=/tmp/k90/kernels.fatbin.gz
# the int8 tile load's other unrolls, for the benchmark (make's NVFLAGS with -D added)
NVF="-O3 -std=c++17 --threads 0 -Xptxas -warn-spills"
for u in 2 4; do
	timeout $(lim 240) make -C cuda/kernels OUT=/tmp/k90u$u ARCHS=90 PTX=90 NVFLAGS="$NVF -DFA_I8_LOAD_UNROLL=$u" > /tmp/w/k90u$u.log 2>&1 &
	eval "ALT$u=\$!"
done

# 3. the tests, cuda's and gpu's side by side on the one GPU
el "tests"
(cd cuda && timeout $(lim 220) /tmp/p/cuda.test -test.v -test.count=1 -test.run 'Attention' -test.timeout 220s > /tmp/w/cuda.log 2>&1; echo "rc=$?" >> /tmp/w/cuda.log) &
CT=$!
(cd engine/compute/gpu && timeout $(lim 240) /tmp/p/gpu.test -test.v -test.count=1 -test.timeout 240s > /tmp/w/gpu.log 2>&1; echo "rc=$?" >> /tmp/w/gpu.log) &
GT=$!
wait $CT $GT
for f in cuda gpu; do
	l=/tmp/w/$f.log
	echo "== $f.test: $(tail -1 $l); $(grep -c '^--- PASS' $l) top-level passed, $(grep -c -- '--- FAIL' $l) failed, $(grep -c -- '--- SKIP' $l) skipped"
	grep -E -- '--- FAIL|^FAIL|panic' $l | head -30
	grep -E -A6 -- '^\s*--- FAIL' $l | grep -E '_test.go:[0-9]+:' | head -20
done
grep -E -- '^--- (PASS|FAIL): TestAttentionPrefillMMA' /tmp/w/cuda.log
grep -hE 'prefillmma_internal_test.go:[0-9]+: chunk' /tmp/w/gpu.log | head -20
grep -hE 'attention_prefill_test.go:[0-9]+: hd=128 heads=32' /tmp/w/cuda.log | head -8
kbench() { # kbench LABEL PATTERN: BenchmarkAttentionPrefill's cases matching PATTERN on $STRATA_CUDA_FATBIN
	(cd cuda && timeout $(lim 90) /tmp/p/cuda.test -test.run '^$' -test.bench "$2" -test.benchtime 100x > /tmp/w/kbench-$1.log 2>&1; echo "rc=$?" >> /tmp/w/kbench-$1.log)
	echo "== BenchmarkAttentionPrefill ($1): $(tail -1 /tmp/w/kbench-$1.log)"
	grep -E '^Benchmark|FAIL|panic' /tmp/w/kbench-$1.log
}
kbench unroll1 'AttentionPrefill'
for u in 2 4; do
	eval "wait \$ALT$u"
	rc=$?
	if [ $rc = 0 ] && [ -f /tmp/k90u$u/kernels.fatbin.gz ]; then
		STRATA_CUDA_FATBIN=/tmp/k90u$u/kernels.fatbin.gz kbench unroll$u 'AttentionPrefill/kv=int8/mma'
	else
		echo "== the FA_I8_LOAD_UNROLL=$u build: rc=$rc"
		grep -E "error" /tmp/w/k90u$u.log | head -5
	fi
	grep -E "spill" /tmp/w/k90u$u.log | grep -i attention | head -5
done

# 4. whole-model prefill over the int8 cache: the tensor-core kernel, then the tiled one
# (STRATA_PREFILL_MMA=0), then the f16 cache's tensor-core run if there is time
wait $SYNTH
el "synth rc=$?: $(tail -2 /tmp/w/synth.log | tr '\n' ' ')"
kill -0 $FULL 2>/dev/null && el "(the full fatbin is still building during the benches below)"
sb() { # sb LABEL TIMEOUT ARGS...: one strata bench, its JSON kept, its rates printed
	local label=$1 t=$2
	shift 2
	el "bench $label: $*"
	timeout $(lim "$t") $S bench -m $Q --backend cuda --json "$@" 2> /tmp/w/sb.err | sed "s/^{/{\"label\":\"$label\",/" | tee -a "$OUT/bench.jsonl" | python3 -c '
import json, sys
for l in sys.stdin:
    try:
        j = json.loads(l)
    except Exception:
        print("  " + l.strip()[:300]); continue
    print("  %s: prefill %.1f tok/s %s, decode %.1f tok/s, load %.1f s" % (j.get("label"), j.get("prefill_tokens_per_s", 0),
        [round(x, 1) for x in j.get("prefill_tokens_per_s_runs", [])], j.get("decode_tokens_per_s", 0), j.get("load_s", 0)))
'
	cat /tmp/w/sb.err >> /tmp/w/bench.log
	tail -2 /tmp/w/sb.err
}
P32="--max-context 33280 --prompt 32768 --decode 16"
if [ -f $Q ]; then
	sb "p32768 int8 mma" 100 --kv int8 $P32
	STRATA_PREFILL_MMA=0 sb "p32768 int8 tiled" 130 --kv int8 $P32
	if [ "$(left)" -gt 90 ]; then
		sb "p32768 f16 mma" 90 --kv f16 $P32
	else
		el "no time left for the f16 comparison run"
	fi
else
	echo "no model: $(tail -3 /tmp/w/synth.log)"
fi
rm -f $Q

# the full fatbin
while kill -0 $FULL 2>/dev/null && [ "$(left)" -gt 0 ]; do sleep 2; done
if kill -0 $FULL 2>/dev/null; then
	kill $FULL
	el "the full build did not finish in time"
else
	wait $FULL
	el "full build rc=$?"
fi
grep -E "error|warning" /tmp/w/full.log | head -20
rm -f "$OUT/k/kernels.fatbin" # a build cut short leaves the raw one, too large to come back
cat /tmp/w/*.log | xz -T4 > "$OUT/logs.txt.xz"
ls -la "$OUT" "$OUT/k" 2>/dev/null
el done
exec >&- 2>&-
wait $TEE # summary.txt complete before the call ends
