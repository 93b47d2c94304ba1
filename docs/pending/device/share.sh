#!/bin/bash
# share.sh: q30b with the late misses: the PCIe share fixed at 0.3/0.45/0.6 with STRATA_PCIE_COPY=1,
# against the default (auto, reads in place), and the peer, on one machine.
# Carry devbin/peer-bin and devbin/share (strata.xz, common.sh). Session 21 wrote it; its machine was
# taken back mid-call, so it has not run yet.
set -u
. devbin/share/common.sh
{
mkdir -p /tmp/m /tmp/peerbin; xz -dc devbin/share/strata.xz > /tmp/m/strata; chmod +x /tmp/m/strata
xz -dc devbin/peer-bin/peer-bin.tar.xz | tar xf - -C /tmp/peerbin &
[ -f /dev/shm/q30b.gguf ] || /tmp/m/strata synth --preset 30b-a3b --quant q4_k --hot-quarter 0.4 -o /dev/shm/q30b.gguf > /tmp/w/s2.log 2>&1
wait; el ready
export LD_LIBRARY_PATH=/tmp/peerbin/bin
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/w/pv & sp=$!
timeout 100 /tmp/peerbin/bin/llama-bench -m /dev/shm/q30b.gguf -o jsonl -fa 1 -ngl 99 -t 16 -ncmoe 24 -p 512 -n 128 -r 2 > $OUT/peer.jsonl 2>/dev/null; kill $sp
echo "peer vram $(sort -n /tmp/w/pv | tail -1) $(grep -o '"n_gen": [0-9]*\|"samples_ts": \[[^]]*\]' $OUT/peer.jsonl | tr '\n' ' ')"; el peer
C="-m /dev/shm/q30b.gguf --vram-budget-mib 8913 --tiered-experts --prompt 512 --decode 128"
sb late1 /tmp/m/strata $C
STRATA_PCIE_COPY=1 sb copy30 /tmp/m/strata $C --pcie-frac 0.3
STRATA_PCIE_COPY=1 sb copy45 /tmp/m/strata $C --pcie-frac 0.45
STRATA_PCIE_COPY=1 sb copy60 /tmp/m/strata $C --pcie-frac 0.6
sb late2 /tmp/m/strata $C
sb inplace45 /tmp/m/strata $C --pcie-frac 0.45
STRATA_PCIE_COPY=1 sb copy45b /tmp/m/strata $C --pcie-frac 0.45
el done
} 2>&1 | tee -a $OUT/share.txt
