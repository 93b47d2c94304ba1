#!/bin/bash
# turns.sh: strata (devbin/turns/strata.xz) beside the peer on one machine: q3n decode, then q30b (balanced), each
# program taking turns.
# Carry devbin/peer-bin (the peer's CUDA build, a tar.xz of its build/bin) and devbin/turns (strata.xz, common.sh):
# together with the tree they just fit the 64 MiB. Session 21's call 11 ran it (cuda/BENCH.md).
set -u
. devbin/turns/common.sh
{
mkdir -p /tmp/m /tmp/peerbin; xz -dc devbin/turns/strata.xz > /tmp/m/strata; chmod +x /tmp/m/strata
xz -dc devbin/peer-bin/peer-bin.tar.xz | tar xf - -C /tmp/peerbin &
[ -f /dev/shm/q3n.gguf ] || /tmp/m/strata synth --arch qwen3next --preset qwen3next-80b-a3b --quant iq3_xxs -o /dev/shm/q3n.gguf > /tmp/w/s1.log 2>&1 &
[ -f /dev/shm/q30b.gguf ] || /tmp/m/strata synth --preset 30b-a3b --quant q4_k --hot-quarter 0.4 -o /dev/shm/q30b.gguf > /tmp/w/s2.log 2>&1 &
wait; ls -la /dev/shm; el ready
export LD_LIBRARY_PATH=/tmp/peerbin/bin; P=/tmp/peerbin/bin/llama-bench
pb(){ local n=$1 M=$2; shift 2; nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/w/$n.vram & local sp=$!
  timeout 300 $P -m $M -o jsonl -fa 1 -ngl 99 -t 16 "$@" > /tmp/w/$n.jsonl 2>/tmp/w/$n.err; local rc=$?; kill $sp; wait $sp 2>/dev/null
  cat /tmp/w/$n.jsonl >> $OUT/peer.jsonl
  echo "$n rc=$rc vram_peak=$(sort -n /tmp/w/$n.vram | tail -1) $(grep -o '"n_prompt": [0-9]*\|"n_gen": [0-9]*\|"samples_ts": \[[^]]*\]' /tmp/w/$n.jsonl | tr '\n' ' ')"; [ $rc -ne 0 ] && tail -3 /tmp/w/$n.err; }
B="-m /dev/shm/q3n.gguf --vram-budget-mib 14000 --host-budget-gib 20 --max-context 1024 --prompt 64 --decode 256"
for i in 1 2; do
  pb peer-q3n$i /dev/shm/q3n.gguf -ncmoe 27 -p 0 -n 64 -r 2
  sb q3n-late${i}a /tmp/m/strata $B; sb q3n-late${i}b /tmp/m/strata $B
done; el q3n
C="-m /dev/shm/q30b.gguf --vram-budget-mib 8913 --tiered-experts --prompt 512 --decode 128"
for i in 1 2; do
  pb peer-q30b$i /dev/shm/q30b.gguf -ncmoe 24 -p 512 -n 128 -r 2
  sb q30b-late${i}a /tmp/m/strata $C; sb q30b-late${i}b /tmp/m/strata $C
done; el done
} 2>&1 | tee -a $OUT/turns.txt
