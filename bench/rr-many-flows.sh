#!/usr/bin/env bash
# tcp-rr with many flows on few workers, against neper's tcp_rr with the same
# flows and threads: transactions/s (alternating rounds, medians, spreads,
# ratio), idle flows, and the peak resident memory of the client (from
# /usr/bin/time) and of the agent (VmHWM; a fresh agent, in its own process,
# for each flow count).
#
#   bench/rr-many-flows.sh [FLOWS=1000,10000] [SECONDS=5] [WORKERS=2] [ROUNDS=3]
#
# FLOWS is a comma-separated list. Each end needs a descriptor per flow: up
# to 19,000 flows under `ulimit -n` 20,000. Needs neper's tcp_rr on PATH
# (../shared/peers) for the comparison; without it, netrig alone.
. "$(dirname "$0")/lib.sh"
FLOWS=${1:-1000,10000}
SECS=${2:-5}
WORKERS=${3:-2}
ROUNDS=${4:-3}
NEPER=1
command -v tcp_rr >/dev/null || { echo "neper's tcp_rr not on PATH: netrig alone" >&2; NEPER=0; }
build
MAX=$(tr ',' '\n' <<<"$FLOWS" | sort -n | tail -1)
# Set-up of 10,000s of connections takes seconds on a loaded host.
BOUND=$((SECS + 60))
for F in ${FLOWS//,/ }; do
  PORT=$(free_port)
  $NETRIG serve -p "$PORT" -q --max-flows "$MAX" >/dev/null 2>&1 &
  AGENT=$!
  BG_PIDS+=("$AGENT")
  sleep 1
  tools="netrig"; [ "$NEPER" = 1 ] && tools="netrig neper"
  for r in $(seq 1 "$ROUNDS"); do
    for tool in $(rotated "$r" $tools); do
      if [ "$tool" = netrig ]; then
        timeout "$BOUND" /usr/bin/time -f "%M" -o "$OUT/time.$F.$r" \
          $NETRIG tcp-rr -H 127.0.0.1 -p "$PORT" -l "$SECS" -P "$F" -T "$WORKERS" --json > "$OUT/netrig.$F.$r.json"
      else
        CPORT=$(free_port); DPORT=$(free_port)
        # A neper server serves one run, then exits; both write logs in their
        # working directory, kept in OUT.
        (cd "$OUT" && timeout "$BOUND" tcp_rr -T "$WORKERS" -F "$F" -C "$CPORT" -P "$DPORT" -l "$SECS" >/dev/null 2>&1) &
        sleep 0.5
        (cd "$OUT" && timeout "$BOUND" tcp_rr -c -H 127.0.0.1 -T "$WORKERS" -F "$F" -C "$CPORT" -P "$DPORT" -l "$SECS") \
          > "$OUT/neper.$F.$r.txt" 2>&1 || true
        wait $! 2>/dev/null || true
      fi
    done
  done
  awk '/VmHWM/{print $2}' "/proc/$AGENT/status" > "$OUT/agent.$F"
  kill "$AGENT"
done
python3 - "$OUT" "$FLOWS" "$ROUNDS" "$SECS" "$WORKERS" "$NEPER" <<'PY'
import json, re, statistics, sys
out, flows, rounds, secs, workers, neper = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6] == "1"
print(f"tcp-rr, 1 byte each way, loopback, {secs} s, {workers} threads per end, {rounds} alternating rounds")
def neper_rate(f, r):
    m = re.search(r"^throughput=([0-9.]+)", open(f"{out}/neper.{f}.{r}.txt").read(), re.M)
    return float(m.group(1)) if m else None
for f in flows:
    docs = [json.load(open(f"{out}/netrig.{f}.{r}.json")) for r in range(1, rounds + 1)]
    n = [d["summary"]["transactions_per_s"] for d in docs]
    idle = max(sum(1 for x in d["flows"] if x["transactions"] == 0) for d in docs)
    rss = max(int(open(f"{out}/time.{f}.{r}").read().split()[-1]) for r in range(1, rounds + 1)) / 1024
    agent = int(open(f"{out}/agent.{f}").read()) / 1024
    print(f"{f:>6} flows  netrig tcp-rr  median {statistics.median(n):9.0f} tps  spread {min(n):.0f}..{max(n):.0f}  "
          f"p99 {statistics.median(d['summary']['latency_us']['p99'] for d in docs):.0f} us  idle flows {idle} (most)  "
          f"peak RSS client {rss:.1f} MiB, agent {agent:.1f} MiB, both {rss + agent:.1f} MiB")
    if neper:
        q = [neper_rate(f, r) for r in range(1, rounds + 1)]
        if None in q:
            print(f"{f:>6} flows  neper tcp_rr: no throughput= line in round(s) {[r + 1 for r, v in enumerate(q) if v is None]}")
            continue
        print(f"{f:>6} flows  neper tcp_rr   median {statistics.median(q):9.0f} tps  spread {min(q):.0f}..{max(q):.0f}")
        print(f"{f:>6} flows  ratio netrig/neper: {statistics.median(n) / statistics.median(q):.3f}")
PY
