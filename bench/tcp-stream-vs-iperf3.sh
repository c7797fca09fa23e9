#!/usr/bin/env bash
# Side-by-side: netrig tcp-stream vs iperf3, one flow over loopback, same
# message size, alternating runs (A B A B ...), medians and ratios.
# CPU per byte is measured the same way for both tools: busy CPU-seconds of
# the whole machine from /proc/stat around each run (both ends are on this
# host), divided by the bytes the receiver got. Not a test: a measurement.
#
#   bench/tcp-stream-vs-iperf3.sh [ROUNDS=5] [SECONDS=5] [MSG=128K]
#
# Needs: iperf3 (apt-get install iperf3), python3, a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-5}
MSG=${3:-128K}
iperf3_and_netrig

for r in $(seq 1 "$ROUNDS"); do
  for tool in netrig iperf3; do
    read -r b0 t0 < <(cpu_ticks)
    if [ $tool = netrig ]; then
      $NETRIG tcp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$MSG" --json > "$OUT/$tool.$r.json"
    else
      iperf3 -c 127.0.0.1 -p $IPORT -t "$SECS" -l "$MSG" -J > "$OUT/$tool.$r.json"
    fi
    read -r b1 t1 < <(cpu_ticks)
    echo "$b0 $t0 $b1 $t1" > "$OUT/$tool.$r.cpu"
  done
done

python3 - "$OUT" "$ROUNDS" "$MSG" "$SECS" <<'PY'
import json, os, statistics, sys
out, rounds, msg, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
hz = os.sysconf("SC_CLK_TCK")
rows = {"netrig": [], "iperf3": []}
for tool in rows:
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/{tool}.{r}.json"))
        if tool == "netrig":
            bps, nbytes = d["summary"]["throughput_bps"], d["summary"]["bytes"]
        else:
            e = d["end"]["sum_received"]
            bps, nbytes = e["bits_per_second"], e["bytes"]
        b0, t0, b1, t1 = map(float, open(f"{out}/{tool}.{r}.cpu").read().split())
        cpu_s = (b1 - b0) / hz
        rows[tool].append((bps, cpu_s / (nbytes / 2**30)))
print(f"tcp-stream, 1 flow, loopback, -m {msg}, {secs} s, {rounds} alternating rounds")
print(f"{'tool':<8} {'median Gbit/s':>14} {'runs Gbit/s':<40} {'median CPU-s/GiB':>17}")
med = {}
for tool, v in rows.items():
    g = [x[0] / 1e9 for x in v]
    c = [x[1] for x in v]
    med[tool] = (statistics.median(g), statistics.median(c))
    print(f"{tool:<8} {med[tool][0]:>14.2f} {' '.join(f'{x:.2f}' for x in g):<40} {med[tool][1]:>17.3f}")
print(f"throughput ratio netrig/iperf3: {med['netrig'][0] / med['iperf3'][0]:.3f}")
print(f"CPU per byte ratio netrig/iperf3: {med['netrig'][1] / med['iperf3'][1]:.3f} (lower is better)")
PY
