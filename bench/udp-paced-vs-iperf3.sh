#!/usr/bin/env bash
# Side-by-side: a paced UDP stream, netrig udp-stream -b RATE (default pacing
# quantum, and --pacing-us 1000 like iperf3's default --pacing-timer) vs
# iperf3 -u -b RATE, 1472-byte datagrams, one flow, alternating runs, medians.
# Compares what arrived (loss %) and what the sending process's CPU cost:
# netrig's sending worker thread (workers.local[].busy_pct) and iperf3's
# client process (cpu_utilization_percent.host_total), both in % of one CPU.
#
#   bench/udp-paced-vs-iperf3.sh [ROUNDS=5] [SECONDS=4] [RATE=1G]
#
# Needs: iperf3, python3, a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-4}
RATE=${3:-1G}
iperf3_and_netrig
for r in $(seq 1 "$ROUNDS"); do
  $NETRIG udp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -b "$RATE" --json 2>/dev/null > "$OUT/netrig.$r.json"
  $NETRIG udp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -b "$RATE" --pacing-us 1000 --json 2>/dev/null > "$OUT/ms.$r.json"
  iperf3 -c 127.0.0.1 -p "$IPORT" -u -b "$RATE" -l 1472 -t "$SECS" -J > "$OUT/iperf3.$r.json" 2>/dev/null || true
done
python3 - "$OUT" "$ROUNDS" "$SECS" "$RATE" <<'PY'
import json, statistics, sys
out, rounds, secs, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = {"netrig": ([], [], []), "ms": ([], [], []), "iperf3": ([], [], [])}
for r in range(1, rounds + 1):
    for name in ("netrig", "ms"):
        d = json.load(open(f"{out}/{name}.{r}.json"))
        s = d["summary"]
        rows[name][0].append(s["recv_throughput_bps"])
        rows[name][1].append(s["udp"]["loss_pct"])
        rows[name][2].append(max(w["busy_pct"] for w in d["workers"]["local"]))
    e = json.load(open(f"{out}/iperf3.{r}.json"))["end"]
    rows["iperf3"][0].append(e["sum"]["bits_per_second"] * (1 - e["sum"]["lost_percent"] / 100))
    rows["iperf3"][1].append(e["sum"]["lost_percent"])
    rows["iperf3"][2].append(e["cpu_utilization_percent"]["host_total"])
med = statistics.median
print(f"paced udp stream at {rate}, 1 flow, 1472-byte datagrams, loopback, {secs:g} s, {rounds} alternating rounds")
label = {"netrig": "netrig (default quantum)", "ms": "netrig --pacing-us 1000", "iperf3": "iperf3 -u"}
for k, (rx, loss, cpu) in rows.items():
    print(f"{label[k]:<26} received {med(rx)/1e6:8.1f} Mbit/s  loss {med(loss):6.2f} %  sender CPU {med(cpu):5.1f} % of a CPU"
          f"  (loss runs {' '.join(f'{x:.2f}' for x in loss)})")
print(f"sender CPU ratio netrig/iperf3: {med(rows['netrig'][2]) / med(rows['iperf3'][2]):.2f} (default quantum), "
      f"{med(rows['ms'][2]) / med(rows['iperf3'][2]):.2f} (1 ms quantum)")
PY
