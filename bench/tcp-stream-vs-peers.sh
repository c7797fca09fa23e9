#!/usr/bin/env bash
# Side-by-side: netrig tcp-stream vs iperf3, netperf TCP_STREAM and nuttcp, one flow
# over loopback, the same message size for send and receive, the same
# congestion control on both sides, alternating runs (netrig, iperf3,
# netperf, netrig, ...), medians and ratios: of the medians, and paired by
# round (the median of each round's netrig/peer, with how many rounds netrig
# led), which a slow round or a drift over the rounds sways less.
# CPU per byte is measured the same way for every tool: busy CPU-seconds of
# the whole machine from /proc/stat around each run (both ends are on this
# host), divided by the bytes the receiver got. Not a test: a measurement.
#
#   bench/tcp-stream-vs-peers.sh [ROUNDS=5] [SECONDS=5] [MSG=128K] [CC=host default] [FLOWS=1]
#
# With FLOWS > 1: netrig -P FLOWS -T FLOWS (a worker thread per flow, as iperf3 3.21 has a
# thread per stream) against iperf3 -P FLOWS; netperf, one flow per process, is left out.
#
# nuttcp has no congestion-control option: its sender takes the host's default. With CC other
# than that default, the script (as root) sets net.ipv4.tcp_congestion_control to CC for each
# nuttcp run only, and back after it (every other tool names CC on its own sockets); not root,
# it leaves nuttcp out and says so.
#
# Needs: iperf3 (../shared/peers or apt-get install iperf3), python3, a release
# build; netperf/netserver and nuttcp (apt-get install nuttcp) when on PATH (each skipped with a
# note otherwise).
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-5}
MSG=${3:-128K}
CC=${4:-$(cat /proc/sys/net/ipv4/tcp_congestion_control)}
[ -n "$CC" ] || CC=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
FLOWS=${5:-1}
iperf3_and_netrig
TOOLS="netrig iperf3"
if [ "$FLOWS" -gt 1 ]; then
  echo "$FLOWS flows: netperf (one flow per process) left out" >&2
elif command -v netperf >/dev/null && command -v netserver >/dev/null; then
  NSPORT=$(free_port)
  background netserver -D -p "$NSPORT"
  sleep 0.5
  TOOLS="$TOOLS netperf"
else
  echo "netperf/netserver not on PATH: netperf skipped" >&2
fi
HOST_CC=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
if [ "$FLOWS" -gt 1 ]; then
  :
elif ! command -v nuttcp >/dev/null; then
  echo "nuttcp not on PATH (apt-get install -y nuttcp): nuttcp skipped" >&2
elif [ "$CC" != "$HOST_CC" ] && [ "$(id -u)" != 0 ]; then
  echo "nuttcp has no congestion-control option and the host's is $HOST_CC, not $CC (root may switch it per run): nuttcp skipped" >&2
else
  UCTL=$(free_port); UDATA=$(free_port)
  background nuttcp -S --nofork -P "$UCTL" -p "$UDATA"
  sleep 0.5
  TOOLS="$TOOLS nuttcp"
  # Bytes for nuttcp's -l (it takes a plain count): 128K -> 131072.
  MSG_BYTES=$(python3 -c 'import sys; s=sys.argv[1]; m={"K":1<<10,"M":1<<20}.get(s[-1].upper(),1); print(int(s.rstrip("kKmM"))*m)' "$MSG")
  trap '[ -n "${CC_RESTORE:-}" ] && sysctl -q -w net.ipv4.tcp_congestion_control="$CC_RESTORE"; drop_ns; kill "${BG_PIDS[@]}" 2>/dev/null || true; rm -rf "$OUT"' EXIT
fi

# nuttcp's sender under CC: the host's default switched for its run alone, when it must be.
nuttcp_run() {
  if [ "$CC" != "$HOST_CC" ]; then
    CC_RESTORE=$HOST_CC
    sysctl -q -w net.ipv4.tcp_congestion_control="$CC"
  fi
  nuttcp -T"$SECS" -l"$MSG_BYTES" -P "$UCTL" -p "$UDATA" -fparse 127.0.0.1 || true
  if [ -n "${CC_RESTORE:-}" ]; then
    sysctl -q -w net.ipv4.tcp_congestion_control="$CC_RESTORE"
    CC_RESTORE=
  fi
}

run_tool() {
  case $1 in
    netrig) $NETRIG tcp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$MSG" -M "$MSG" --cc "$CC" -P "$FLOWS" -T "$FLOWS" --json ;;
    iperf3) iperf3 -c 127.0.0.1 -p "$IPORT" -t "$SECS" -l "$MSG" -C "$CC" -P "$FLOWS" -J ;;
    netperf) netperf -H 127.0.0.1 -p "$NSPORT" -l "$SECS" -t TCP_STREAM -P 0 -- -m "$MSG" -M "$MSG" -K "$CC" ;;
    nuttcp) nuttcp_run ;;
  esac
}
rounds_with_cpu "$ROUNDS" $TOOLS

python3 - "$OUT" "$ROUNDS" "$MSG" "$SECS" "$CC" "$FLOWS" $TOOLS <<'PY'
import json, os, statistics, sys
out, rounds, msg, secs, cc, flows, tools = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), sys.argv[7:]
hz = os.sysconf("SC_CLK_TCK")
rows = {t: [] for t in tools}
per_round = {}  # round -> tool -> (bits/s, CPU-s/GiB), for ratios paired by round
for tool in tools:
    for r in range(1, rounds + 1):
        text = open(f"{out}/{tool}.{r}.out").read()
        try:
            if tool == "netrig":
                d = json.loads(text)
                bps, nbytes = d["summary"]["throughput_bps"], d["summary"]["bytes"]
            elif tool == "iperf3":
                e = json.loads(text)["end"]["sum_received"]
                bps, nbytes = e["bits_per_second"], e["bytes"]
            elif tool == "nuttcp":
                # -fparse: "megabytes=M real_seconds=S rate_Mbps=R ...", MB of 2^20 bytes received.
                kv = dict(w.split("=", 1) for w in text.split() if "=" in w)
                bps, nbytes = float(kv["rate_Mbps"]) * 1e6, float(kv["megabytes"]) * 2**20
            else:
                # "recv-socket send-socket message elapsed-s 10^6bits/s"
                f = text.split()
                el, bps = float(f[3]), float(f[4]) * 1e6
                nbytes = bps * el / 8
        except (ValueError, KeyError, IndexError):
            print(f"{tool} round {r}: no result", file=sys.stderr)
            continue
        b0, t0, b1, t1 = map(float, open(f"{out}/{tool}.{r}.cpu").read().split())
        rows[tool].append((bps, (b1 - b0) / hz / (nbytes / 2**30)))
        per_round.setdefault(r, {})[tool] = rows[tool][-1]
what = "1 flow" if flows == 1 else f"{flows} flows, a thread per flow on each end (netrig -T {flows}; iperf3's own)"
print(f"tcp-stream, {what}, loopback, send and receive {msg}, congestion control {cc}, {secs} s, "
      f"{rounds} alternating rounds")
print(f"{'tool':<8} {'median Gbit/s':>14} {'runs Gbit/s':<40} {'median CPU-s/GiB':>17}")
med = {}
for tool, v in rows.items():
    if not v:
        continue
    g = [x[0] / 1e9 for x in v]
    c = [x[1] for x in v]
    med[tool] = (statistics.median(g), statistics.median(c))
    print(f"{tool:<8} {med[tool][0]:>14.2f} {' '.join(f'{x:.2f}' for x in g):<40} {med[tool][1]:>17.3f}")
for peer in ("iperf3", "netperf", "nuttcp"):
    if "netrig" in med and peer in med:
        print(f"throughput ratio netrig/{peer}: {med['netrig'][0] / med[peer][0]:.3f}   "
              f"CPU per byte ratio netrig/{peer}: {med['netrig'][1] / med[peer][1]:.3f} (lower is better)")
# The same ratios paired by round (each round's netrig against the same round's peer, then the
# median): a drift over the rounds, or a slow round, weighs on both sides of each pair.
for peer in ("iperf3", "netperf", "nuttcp"):
    pairs = [(v["netrig"][0] / v[peer][0], v["netrig"][1] / v[peer][1])
             for v in per_round.values() if "netrig" in v and peer in v]
    if pairs:
        t = [p[0] for p in pairs]
        c = [p[1] for p in pairs]
        print(f"paired ratio by round, netrig/{peer}: throughput {statistics.median(t):.3f} "
              f"(ahead in {sum(x > 1 for x in t)} of {len(t)})   CPU per byte {statistics.median(c):.3f} "
              f"(lower in {sum(x < 1 for x in c)} of {len(c)})")
PY
