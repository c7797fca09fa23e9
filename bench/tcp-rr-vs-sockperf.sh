#!/usr/bin/env bash
# Side-by-side: netrig tcp-rr (1 flow, 1-byte request and response, closed
# loop) vs sockperf ping-pong over TCP, alternating runs, medians. sockperf
# reports half a round trip as its latency: round trips/s = 1e6 / (2 x avg).
#
#   bench/tcp-rr-vs-sockperf.sh [ROUNDS=5] [SECONDS=4]
#
# Needs: sockperf (apt-get install sockperf), python3, a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-4}
need sockperf
build
SPORT=$(free_port); NPORT=$(free_port)
background sockperf sr --tcp -i 127.0.0.1 -p "$SPORT"
background $NETRIG serve -p "$NPORT" -q
sleep 1
for r in $(seq 1 "$ROUNDS"); do
  $NETRIG tcp-rr -H 127.0.0.1 -p "$NPORT" -l "$SECS" --json 2>/dev/null > "$OUT/netrig.$r.json"
  sockperf pp --tcp -i 127.0.0.1 -p "$SPORT" -t "$SECS" 2>&1 > "$OUT/sockperf.$r.txt" || true
done
python3 - "$OUT" "$ROUNDS" "$SECS" <<'PY'
import json, re, statistics, sys
out, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
n = [json.load(open(f"{out}/netrig.{r}.json"))["summary"]["transactions_per_s"] for r in range(1, rounds + 1)]
s = []
for r in range(1, rounds + 1):
    m = re.search(r"avg-latency=([0-9.]+)", open(f"{out}/sockperf.{r}.txt").read())
    s.append(1e6 / (2 * float(m.group(1))))
print(f"tcp request/response, 1 flow, 1 byte each way, loopback, {secs} s, {rounds} alternating rounds")
print(f"netrig tcp-rr      median {statistics.median(n):9.0f} round trips/s   runs {' '.join(f'{x:.0f}' for x in n)}")
print(f"sockperf pp --tcp  median {statistics.median(s):9.0f} round trips/s   runs {' '.join(f'{x:.0f}' for x in s)}")
print(f"ratio netrig/sockperf: {statistics.median(n) / statistics.median(s):.3f}")
PY
