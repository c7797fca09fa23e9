#!/usr/bin/env bash
# Side-by-side connection rate: netrig tcp-crr (1 flow, 1-byte request and
# response, a new connection per transaction) vs netperf TCP_CRR and neper
# tcp_crr (1 flow, 1 thread), alternating runs, medians.
#
#   bench/tcp-crr-vs-peers.sh [ROUNDS=3] [SECONDS=3] [NETRIG_ARGS...]
#
# Needs: netperf/netserver and neper's tcp_crr on PATH (../shared/peers), a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-3}
SECS=${2:-3}
shift 2 || true
need netperf; need netserver; need tcp_crr
build
NSPORT=$(free_port); NPORT=$(free_port); CPORT=$(free_port); DPORT=$(free_port)
background netserver -D -p "$NSPORT"
background $NETRIG serve -p "$NPORT" -q
sleep 1
for r in $(seq 1 "$ROUNDS"); do
  $NETRIG tcp-crr -H 127.0.0.1 -p "$NPORT" -l "$SECS" --json "$@" 2>/dev/null > "$OUT/netrig.$r.json"
  netperf -H 127.0.0.1 -p "$NSPORT" -l "$SECS" -t TCP_CRR -P 0 -- -r 1,1 > "$OUT/netperf.$r.txt" 2>&1 || true
  # A neper server serves one run, then exits; both write logs where they run: in OUT.
  (cd "$OUT" && exec tcp_crr -T 1 -F 1 -C "$CPORT" -P "$DPORT" -l "$SECS") >/dev/null 2>&1 & sleep 0.3
  (cd "$OUT" && exec tcp_crr -c -H 127.0.0.1 -T 1 -F 1 -C "$CPORT" -P "$DPORT" -l "$SECS") > "$OUT/neper.$r.txt" 2>&1 || true
  wait $! 2>/dev/null || true
done
python3 - "$OUT" "$ROUNDS" "$SECS" <<'PY'
import json, re, statistics, sys
out, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
n = [json.load(open(f"{out}/netrig.{r}.json"))["summary"]["transactions_per_s"] for r in range(1, rounds + 1)]
def netperf(r):
    # The result line: socket sizes, request, response, elapsed, rate (then the remote's sizes).
    line = [l for l in open(f"{out}/netperf.{r}.txt").read().splitlines() if len(l.split()) >= 6][0]
    return float(line.split()[5])
def neper(r):
    m = re.search(r"^throughput=([0-9.]+)", open(f"{out}/neper.{r}.txt").read(), re.M)
    return float(m.group(1))
p = [netperf(r) for r in range(1, rounds + 1)]
q = [neper(r) for r in range(1, rounds + 1)]
print(f"tcp connection per transaction, 1 flow, 1 byte each way, loopback, {secs} s, {rounds} alternating rounds")
for name, v in [("netrig tcp-crr", n), ("netperf TCP_CRR", p), ("neper tcp_crr", q)]:
    print(f"{name:16} median {statistics.median(v):9.0f} tps   spread {min(v):.0f}..{max(v):.0f}")
print(f"ratio netrig/netperf: {statistics.median(n) / statistics.median(p):.3f}")
print(f"ratio netrig/neper:   {statistics.median(n) / statistics.median(q):.3f}")
PY
