#!/bin/bash
# prep.sh: a fresh machine made ready for q30b runs beside the peer, in one call (~325-355 s
# on the H200): the peer built into /tmp/peer while Strata synthesises /dev/shm/q30b.gguf.
# Before the call: build.sh's strata xz'd to devbin/ca/strata.xz, common.sh copied to
# devbin/, ../shared/peer copied to .peer/ (ignored); carry devbin and .peer. The benches
# go in the next call, on the same machine.
. devbin/common.sh; mkdir -p /tmp/m; xz -dc devbin/ca/strata.xz > /tmp/m/strata; chmod +x /tmp/m/strata
(sh .peer/build.sh cuda /tmp/peer > /tmp/w/peer.log 2>&1; echo "peer rc=$?" >> /tmp/w/peer.log) &
/tmp/m/strata synth --preset 30b-a3b --quant q4_k --hot-quarter 0.4 -o /dev/shm/q30b.gguf > /tmp/w/synth.log 2>&1; tail -c 200 /tmp/w/synth.log; el synth
wait; tail -2 /tmp/w/peer.log; el done
