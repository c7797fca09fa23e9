#!/usr/bin/env bash
# Side-by-side: a paced TCP stream, netrig tcp-stream -b RATE (default pacing
# quantum, and --pacing-us 1000 like iperf3's default --pacing-timer) vs
# iperf3 -b RATE, same message size, one flow, alternating runs, medians.
# Compares the rate that arrived, how evenly (the spread of 0.1 s interval
# rates, max - min, as % of the rate) and what the sending process's CPU
# cost: netrig's sending worker thread (workers.local[].busy_pct) and
# iperf3's client process (cpu_utilization_percent.host_total), both in %
# of one CPU.
#
#   bench/tcp-paced-vs-iperf3.sh [ROUNDS=5] [SECONDS=4] [RATE=1G] [MSG=128K]
#
# Needs: iperf3, python3, a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-4}
RATE=${3:-1G}
MSG=${4:-128K}
iperf3_and_netrig
for r in $(seq 1 "$ROUNDS"); do
  $NETRIG tcp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -b "$RATE" -m "$MSG" -i 0.1 --json 2>/dev/null > "$OUT/netrig.$r.json"
  $NETRIG tcp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -b "$RATE" -m "$MSG" -i 0.1 --pacing-us 1000 --json 2>/dev/null > "$OUT/ms.$r.json"
  iperf3 -c 127.0.0.1 -p "$IPORT" -b "$RATE" -l "$MSG" -t "$SECS" -i 0.1 -J > "$OUT/iperf3.$r.json" 2>/dev/null || true
done
python3 - "$OUT" "$ROUNDS" "$SECS" "$RATE" "$MSG" <<'PY'
import json, statistics, sys
out, rounds, secs, rate, msg = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
rows = {"netrig": ([], [], []), "ms": ([], [], []), "iperf3": ([], [], [])}
def spread(xs):
    return (max(xs) - min(xs)) / statistics.median(xs) * 100 if xs else float("nan")
for r in range(1, rounds + 1):
    for name in ("netrig", "ms"):
        d = json.load(open(f"{out}/{name}.{r}.json"))
        rows[name][0].append(d["summary"]["throughput_bps"])
        full = [i["throughput_bps"] for i in d["intervals"] if i["end_s"] - i["start_s"] > 0.09]
        rows[name][1].append(spread(full[1:]))
        rows[name][2].append(max(w["busy_pct"] for w in d["workers"]["local"]))
    d = json.load(open(f"{out}/iperf3.{r}.json"))
    rows["iperf3"][0].append(d["end"]["sum_received"]["bits_per_second"])
    full = [i["sum"]["bits_per_second"] for i in d["intervals"] if i["sum"]["seconds"] > 0.09]
    rows["iperf3"][1].append(spread(full[1:]))
    rows["iperf3"][2].append(d["end"]["cpu_utilization_percent"]["host_total"])
med = statistics.median
print(f"paced tcp stream at {rate}, 1 flow, {msg} messages, loopback, {secs:g} s, {rounds} alternating rounds")
label = {"netrig": "netrig (default quantum)", "ms": "netrig --pacing-us 1000", "iperf3": "iperf3 -b"}
for k, (rx, sp, cpu) in rows.items():
    print(f"{label[k]:<26} received {med(rx)/1e6:8.1f} Mbit/s  0.1 s intervals spread {med(sp):5.1f} %  "
          f"sender CPU {med(cpu):5.1f} % of a CPU")
print(f"sender CPU ratio netrig/iperf3: {med(rows['netrig'][2]) / med(rows['iperf3'][2]):.2f} (default quantum), "
      f"{med(rows['ms'][2]) / med(rows['iperf3'][2]):.2f} (1 ms quantum)")
PY
