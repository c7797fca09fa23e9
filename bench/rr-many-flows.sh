#!/usr/bin/env bash
# tcp-rr with many flows on few workers: transactions/s, idle flows and the
# client's peak resident memory (from /usr/bin/time), against an agent in
# its own process.
#
#   bench/rr-many-flows.sh [FLOWS=1000] [SECONDS=5] [WORKERS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
FLOWS=${1:-1000}
SECS=${2:-5}
WORKERS=${3:-2}
cargo build --release -q
NETRIG=target/release/netrig
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
OUT=$(mktemp -d)
$NETRIG serve -p "$PORT" -q & PID=$!
trap 'kill $PID 2>/dev/null || true; rm -rf "$OUT"' EXIT
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
