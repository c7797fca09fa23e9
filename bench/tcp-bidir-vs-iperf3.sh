#!/usr/bin/env bash
# Side-by-side: netrig tcp-bidir against iperf3 --bidir, FLOWS flows each way over loopback, the
# same message size for send and receive and the same congestion control on both sides,
# alternating runs, medians and ratios (of the medians, and paired by round). A third column runs
# netrig with `--notsent-lowat off`: senders that fill their whole send buffer, as iperf3's and
# netrig's before 2026-11-28 did (CHANGELOG, "unpaced senders keep two messages unsent").
# Throughput is both directions' received bytes over the run; CPU per byte is busy CPU-seconds of
# the whole machine from /proc/stat around each run (both ends are on this host) per GiB
# received. Not a test: a measurement.
#
#   bench/tcp-bidir-vs-iperf3.sh [ROUNDS=5] [SECONDS=3] [MSG=128K] [CC=host default] [FLOWS=1]
#
# Needs: iperf3 (../shared/peers or apt-get install iperf3), python3, a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-3}
MSG=${3:-128K}
CC=${4:-$(cat /proc/sys/net/ipv4/tcp_congestion_control)}
[ -n "$CC" ] || CC=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
FLOWS=${5:-1}
iperf3_and_netrig
TOOLS="netrig netrig-off iperf3"
run_tool() {
  case $1 in
    netrig) $NETRIG tcp-bidir -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$MSG" -M "$MSG" --cc "$CC" -P "$FLOWS" --json ;;
    netrig-off) $NETRIG tcp-bidir -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$MSG" -M "$MSG" --cc "$CC" -P "$FLOWS" --notsent-lowat off --json ;;
    iperf3) iperf3 -c 127.0.0.1 -p "$IPORT" --bidir -t "$SECS" -l "$MSG" -C "$CC" -P "$FLOWS" -J ;;
  esac
}
rounds_with_cpu "$ROUNDS" $TOOLS

python3 - "$OUT" "$ROUNDS" "$MSG" "$SECS" "$CC" "$FLOWS" $TOOLS <<'PY'
import json, os, statistics, sys
out, rounds, msg, secs, cc, flows, tools = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), sys.argv[7:]
hz = os.sysconf("SC_CLK_TCK")
rows = {t: [] for t in tools}
per_round = {}
for tool in tools:
    for r in range(1, rounds + 1):
        try:
            d = json.load(open(f"{out}/{tool}.{r}.out"))
            if tool.startswith("netrig"):
                s = d["summary"]
                bps, nbytes = s["throughput_bps"], s["bytes"]
            else:
                e = d["end"]
                a, b = e["sum_received"], e["sum_received_bidir_reverse"]
                bps, nbytes = a["bits_per_second"] + b["bits_per_second"], a["bytes"] + b["bytes"]
        except (ValueError, KeyError, OSError):
            print(f"{tool} round {r}: no result", file=sys.stderr)
            continue
        b0, t0, b1, t1 = map(float, open(f"{out}/{tool}.{r}.cpu").read().split())
        rows[tool].append((bps, (b1 - b0) / hz / (nbytes / 2**30)))
        per_round.setdefault(r, {})[tool] = rows[tool][-1]
print(f"tcp-bidir, {flows} flow(s) each way, loopback, send and receive {msg}, congestion control {cc}, "
      f"{secs} s, {rounds} alternating rounds; netrig-off: netrig with --notsent-lowat off")
print(f"{'tool':<11} {'median Gbit/s':>14} {'runs Gbit/s':<44} {'median CPU-s/GiB':>17}")
med = {}
for tool, v in rows.items():
    if not v:
        continue
    g = [x[0] / 1e9 for x in v]
    c = [x[1] for x in v]
    med[tool] = (statistics.median(g), statistics.median(c))
    print(f"{tool:<11} {med[tool][0]:>14.2f} {' '.join(f'{x:.1f}' for x in g):<44} {med[tool][1]:>17.3f}")
for a, b in (("netrig", "iperf3"), ("netrig-off", "iperf3"), ("netrig", "netrig-off")):
    if a in med and b in med:
        pairs = [(v[a][0] / v[b][0], v[a][1] / v[b][1]) for v in per_round.values() if a in v and b in v]
        t = [p[0] for p in pairs]
        c = [p[1] for p in pairs]
        print(f"throughput ratio {a}/{b}: {med[a][0] / med[b][0]:.3f} (paired {statistics.median(t):.3f}, "
              f"ahead in {sum(x > 1 for x in t)} of {len(t)})   CPU per byte ratio: {med[a][1] / med[b][1]:.3f} "
              f"(paired {statistics.median(c):.3f}, lower is better)")
PY
