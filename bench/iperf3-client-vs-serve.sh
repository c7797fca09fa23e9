#!/usr/bin/env bash
# iperf3's own client against `netrig serve` and against `iperf3 -s`, side by side on
# loopback: the throughput the same iperf3 client reaches against each server (its JSON's
# end.sum_received, or end.sum for UDP), alternating rounds, medians and the ratio paired by
# round, and the machine's CPU per GB moved (/proc/stat around each run). netrig is served
# twice: on its own port (where it tells an iperf3 client by its cookie) and on a port of
# its own for iperf3 (`--iperf3-port`). Goal (#41): netrig at 0.98x iperf3 -s or better.
#
#   bench/iperf3-client-vs-serve.sh [ROUNDS=7] [SECONDS=5] [IPERF3_CLIENT_ARGS...]
#   e.g. bench/iperf3-client-vs-serve.sh 7 5 -P 4        # four streams
#        bench/iperf3-client-vs-serve.sh 7 5 -R          # the server sends
#        bench/iperf3-client-vs-serve.sh 7 5 -u -b 2G    # UDP
#
# Needs: iperf3 on PATH (../shared/peers/iperf3 3.21: PATH=../shared/peers:$PATH), a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-7}
SECS=${2:-5}
shift 2 || true
ARGS=("$@")
need iperf3
build
IPORT=$(free_port); NPORT=$(free_port); N3PORT=$(free_port)
background iperf3 -s -p "$IPORT"
background $NETRIG serve -p "$NPORT" --iperf3-port "$N3PORT" -q
sleep 1
run_tool() {
  local port
  case $1 in
    iperf3-s) port=$IPORT ;;
    netrig-serve) port=$NPORT ;;
    netrig-iperf3-port) port=$N3PORT ;;
  esac
  iperf3 -c 127.0.0.1 -p "$port" -t "$SECS" -J "${ARGS[@]}"
}
rounds_with_cpu "$ROUNDS" iperf3-s netrig-serve netrig-iperf3-port
python3 - "$OUT" "$ROUNDS" "${ARGS[*]}" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
from rounds import paired
out, rounds, args = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def run(tool, r):
    try:
        end = json.load(open(f"{out}/{tool}.{r}.out"))["end"]
    except (ValueError, KeyError, OSError):
        return None, None
    s = end.get("sum_received") or end.get("sum")
    b0, t0, b1, t1 = (int(x) for x in open(f"{out}/{tool}.{r}.cpu").read().split())
    return s["bits_per_second"], (b1 - b0) / max(t1 - t0, 1) * 2 / max(s["bytes"] / 1e9, 1e-9)
tools = ["iperf3-s", "netrig-serve", "netrig-iperf3-port"]
res = {t: [run(t, r) for r in range(1, rounds + 1)] for t in tools}
print(f"iperf3 client {args or '(TCP, 1 stream)'}: {rounds} rounds; Gbit/s the client's JSON reports "
      "(end.sum_received), machine CPU-seconds per GB moved")
for t in tools:
    ok = [x for x in res[t] if x[0] is not None]
    if not ok:
        print(f"  {t:20} no run finished"); continue
    print(f"  {t:20} {statistics.median(x[0] for x in ok) / 1e9:7.2f} Gbit/s   "
          f"{statistics.median(x[1] for x in ok):6.3f} CPU-s/GB   ({len(ok)} of {rounds} runs)")
base = [x[0] for x in res["iperf3-s"]]
for t in tools[1:]:
    pairs = [(x[0], b) for x, b in zip(res[t], base) if x[0] is not None and b is not None]
    print(f"  {t} / iperf3-s: {paired([a for a, _ in pairs], [b for _, b in pairs])}")
PY
