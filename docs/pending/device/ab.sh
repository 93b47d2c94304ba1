#!/bin/bash
# ab.sh PART: the A/B runs docs/pending asks for, on the H200, from the repository root.
# Made where Go is (see build.sh), carried as devbin/ab (ignored by git):
#   for r in 117a054 HEAD; do git worktree add /tmp/src-$r $r; done     # before and with huge pages
#   bash docs/pending/device/build.sh /tmp/src-117a054 /tmp/b-base strata
#   bash docs/pending/device/build.sh /tmp/src-HEAD /tmp/b-head strata
#   mkdir -p devbin/ab && for b in base head; do xz -9 -c /tmp/b-$b/strata > devbin/ab/strata-$b.xz; done
#   cp docs/pending/device/*.sh devbin/ab/
# PART 1 (~6 min): q3n decode: base and head taking turns, 3 rounds.
# PART 2 (~3 min, right after, same machine): q30b decode base vs head. The peer's
# numbers come from a call of their own (carry the peer's build, see ../shared/peer/README.md):
# its binaries and these do not fit one carry.
# Output goes through tee by a pipe, not a process substitution, so nothing waits on it.
set -u
. devbin/ab/common.sh
D=$R/devbin/ab
for b in base head; do [ -x /tmp/m/strata-$b ] || { xz -dc $D/strata-$b.xz > /tmp/m/strata-$b && chmod +x /tmp/m/strata-$b; }; done
Q3=/dev/shm/q3n.gguf; Q30=/dev/shm/q30b.gguf
part1() {
	[ -f $Q3 ] || /tmp/m/strata-head synth --arch qwen3next --preset qwen3next-80b-a3b --quant iq3_xxs -o $Q3 > /tmp/w/synth.log 2>&1
	el "q3n ready"; grep AnonHugePages /proc/meminfo
	local B="-m $Q3 --vram-budget-mib 14000 --host-budget-gib 20 --max-context 1024 --prompt 64 --decode 256"
	for i in 1 2 3; do
		sb dec-base$i /tmp/m/strata-base $B; el
		sb dec-head$i /tmp/m/strata-head $B; el
	done
}
part2() {
	rm -f $Q3
	/tmp/m/strata-head synth --preset 30b-a3b --quant q4_k --hot-quarter 0.4 -o $Q30 > /tmp/w/synth30.log 2>&1; el "q30b ready"
	local C="-m $Q30 --vram-budget-mib 8913 --tiered-experts --prompt 512 --decode 128"
	for i in 1 2; do
		sb q30-base$i /tmp/m/strata-base $C; el
		sb q30-head$i /tmp/m/strata-head $C; el
	done
}
part${1:-1} 2>&1 | tee -a $OUT/log.txt
