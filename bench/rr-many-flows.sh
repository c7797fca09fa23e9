#!/usr/bin/env bash
# tcp-rr with many flows on few workers: transactions/s, idle flows and the
# client's peak resident memory (from /usr/bin/time), against an agent in
# its own process.
#
#   bench/rr-many-flows.sh [FLOWS=1000] [SECONDS=5] [WORKERS=2]
. "$(dirname "$0")/lib.sh"
FLOWS=${1:-1000}
SECS=${2:-5}
WORKERS=${3:-2}
build
PORT=$(free_port)
background $NETRIG serve -p "$PORT" -q
sleep 1
/usr/bin/time -v $NETRIG tcp-rr -H 127.0.0.1 -p "$PORT" -l "$SECS" -P "$FLOWS" -T "$WORKERS" --json > "$OUT/r.json" 2> "$OUT/time.txt"
python3 - "$OUT" "$FLOWS" <<'PY'
import json, re, sys
out, flows = sys.argv[1], sys.argv[2]
d = json.load(open(f"{out}/r.json"))
s = d["summary"]
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/time.txt").read()).group(1))
idle = sum(1 for f in d["flows"] if f["transactions"] == 0)
print(f"tcp-rr, {flows} flows on {len(d['workers']['local'])} client workers: {s['transactions_per_s']:.0f} transactions/s, "
      f"p99 {s['latency_us']['p99']:.0f} us, {idle} idle flows, client peak RSS {rss/1024:.1f} MiB")
PY
