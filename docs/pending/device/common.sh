# common.sh: sourced by a device call script. el: elapsed; js FILE: the numbers read from a bench JSON;
# sb NAME BIN ARGS: one strata bench with its VRAM peak.
T0=${T0:-$(date +%s)}; el(){ echo "[$(($(date +%s)-T0))s] $*"; }
R=$(pwd); mkdir -p /tmp/m /tmp/w
export STRATA_CUDA_FATBIN=$R/cuda/kernels.fatbin.gz
js(){ python3 - "$1" <<'PY'
import json,sys
try: o=json.load(open(sys.argv[1]))
except Exception as e: print("no json:",e); sys.exit()
c=o.get('expert_cache') or {}
print("prefill %.1f decode %.1f ready %.1f share %s pcie_reads %s copied %s streamed %s upload_s %s cpu_miss_s %s batch %s" % (o.get('prefill_tokens_per_s',0),o.get('decode_tokens_per_s',0),o.get('ready_s',0),c.get('pcie_share'),c.get('pcie_reads'),c.get('pcie_copied_experts'),c.get('streamed_experts'),c.get('upload_s'),c.get('cpu_miss_s'),o.get('prefill_batch')), "decode host us/token:", c.get('decode_host_us_per_token'))
PY
}
# sb NAME BIN ARGS...: one strata bench; its JSON is a line of $OUT/bench.jsonl, its VRAM peak in the log.
sb(){ local n=$1 bin=$2; shift 2
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/w/$n.vram 2>/dev/null & local sp=$!
  timeout 300 $bin bench --backend cuda --json "$@" > /tmp/w/$n.json 2>/tmp/w/$n.err; local rc=$?
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
  echo "$n rc=$rc vram_peak=$(sort -n /tmp/w/$n.vram | tail -1) $(js /tmp/w/$n.json)"; [ $rc -ne 0 ] && tail -3 /tmp/w/$n.err
  # One file for every run: at most 8 files come back from $OUT.
  local r; r=$(cat /tmp/w/$n.json 2>/dev/null); [ -n "$r" ] || r=null
  echo "{\"run\": \"$n\", \"report\": $r}" >> $OUT/bench.jsonl
}
