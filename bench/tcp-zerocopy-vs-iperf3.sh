#!/usr/bin/env bash
# Side-by-side: what sendfile saves the sender. netrig tcp-stream with and
# without -Z vs iperf3 with and without -Z, one flow over loopback, same
# message size, alternating runs (netrig, netrig -Z, iperf3, iperf3 -Z, ...),
# medians and ratios.
#
# For each run: throughput as the receiver got it; the sender's own CPU, in
# % of one CPU (netrig: the sending worker thread, workers.local[].busy_pct;
# iperf3: the client process, end.cpu_utilization_percent.host_total) and as
# µs of CPU per KB sent (netrig: the worker's cpu_s over its window; iperf3:
# host_total x the sender's seconds; / the sender's KB); and the whole
# machine's CPU per KB (both ends are on this host): netrig's own
# summary.service_demand.local over its window, and for both tools busy
# CPU-seconds from /proc/stat around the run / KB (set-up included).
# KB = 1024 bytes. Not a test: a measurement.
#
#   bench/tcp-zerocopy-vs-iperf3.sh [ROUNDS=5] [SECONDS=5] [MSG=128K]
#
# Needs: iperf3 (apt-get install iperf3), python3, a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-5}
MSG=${3:-128K}
iperf3_and_netrig

for r in $(seq 1 "$ROUNDS"); do
  for v in netrig netrig-Z iperf3 iperf3-Z; do
    read -r b0 _ < <(cpu_ticks)
    case $v in
      netrig)   $NETRIG tcp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$MSG" --json 2>/dev/null ;;
      netrig-Z) $NETRIG tcp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$MSG" -Z --json 2>/dev/null ;;
      iperf3)   iperf3 -c 127.0.0.1 -p "$IPORT" -t "$SECS" -l "$MSG" -J ;;
      iperf3-Z) iperf3 -c 127.0.0.1 -p "$IPORT" -t "$SECS" -l "$MSG" -Z -J ;;
    esac > "$OUT/$v.$r.json"
    read -r b1 _ < <(cpu_ticks)
    echo "$b0 $b1" > "$OUT/$v.$r.cpu"
  done
done

python3 - "$OUT" "$ROUNDS" "$MSG" "$SECS" <<'PY'
import json, os, statistics, sys
out, rounds, msg, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
hz = os.sysconf("SC_CLK_TCK")
names = ["netrig", "netrig-Z", "iperf3", "iperf3-Z"]
# per variant: Gbit/s, sender CPU %, sender us/KB, machine us/KB (/proc/stat), netrig service demand us/KB
rows = {n: [] for n in names}
for n in names:
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/{n}.{r}.json"))
        if n.startswith("netrig"):
            bps, nbytes = d["summary"]["throughput_bps"], d["summary"]["bytes"]
            sender = max(d["workers"]["local"], key=lambda w: w["flows"])  # the one with the flow
            cpu_pct, cpu_s = sender["busy_pct"], sender["cpu_s"]
            sent = d["flows"][0]["sender_bytes"]
            sd = d["summary"]["service_demand"]["local"]
        else:
            e = d["end"]
            bps, nbytes = e["sum_received"]["bits_per_second"], e["sum_received"]["bytes"]
            cpu_pct, sent = e["cpu_utilization_percent"]["host_total"], e["sum_sent"]["bytes"]
            cpu_s = cpu_pct / 100 * e["sum_sent"]["seconds"]
            sd = None
        b0, b1 = map(float, open(f"{out}/{n}.{r}.cpu").read().split())
        machine = (b1 - b0) / hz * 1e6 / (nbytes / 1024)
        sender_us_kb = cpu_s * 1e6 / (sent / 1024)
        rows[n].append((bps / 1e9, cpu_pct, sender_us_kb, machine, sd))
med = {n: [statistics.median(x[i] for x in v) if v[0][i] is not None else None for i in range(5)]
       for n, v in rows.items()}
print(f"tcp-stream vs iperf3, with and without -Z (sendfile), 1 flow, loopback, -m {msg}, {secs} s, "
      f"{rounds} alternating rounds; medians")
print(f"{'':<9} {'Gbit/s':>7} {'sender CPU %':>13} {'sender us/KB':>13} {'machine us/KB':>14} "
      f"{'service demand':>15}   runs Gbit/s")
for n in names:
    m = med[n]
    sd = f"{m[4]:.4f}" if m[4] is not None else "-"
    runs = " ".join(f"{x[0]:.2f}" for x in rows[n])
    print(f"{n:<9} {m[0]:>7.2f} {m[1]:>13.1f} {m[2]:>13.4f} {m[3]:>14.4f} {sd:>15}   {runs}")
def ratio(a, b, label):
    x, y = med[a], med[b]
    print(f"{label:<22} throughput {x[0] / y[0]:.3f}   sender CPU/KB {x[2] / y[2]:.3f}   "
          f"machine CPU/KB {x[3] / y[3]:.3f}")
print("ratios (CPU per KB: lower is better)")
ratio("netrig-Z", "netrig", "netrig -Z / netrig")
ratio("iperf3-Z", "iperf3", "iperf3 -Z / iperf3")
ratio("netrig-Z", "iperf3-Z", "netrig -Z / iperf3 -Z")
ratio("netrig", "iperf3", "netrig / iperf3")
PY
