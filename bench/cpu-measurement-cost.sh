#!/usr/bin/env bash
# What measuring costs: netrig tcp-stream with CPU measurement (the default:
# /proc/stat at the window's start and end on both ends, TCP_INFO and kernel
# counters) against --no-cpu, alternating runs, medians and ratio.
#
#   bench/cpu-measurement-cost.sh [ROUNDS=6] [SECONDS=4] [FLOWS=1]
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-6}
SECS=${2:-4}
FLOWS=${3:-1}
build
PORT=$(free_port)
background $NETRIG serve -p "$PORT" -q
sleep 1
for r in $(seq 1 "$ROUNDS"); do
  $NETRIG tcp-stream -H 127.0.0.1 -p "$PORT" -l "$SECS" -P "$FLOWS" --json > "$OUT/with.$r.json" 2>/dev/null
  $NETRIG tcp-stream -H 127.0.0.1 -p "$PORT" -l "$SECS" -P "$FLOWS" --no-cpu --json > "$OUT/without.$r.json" 2>/dev/null
done
python3 - "$OUT" "$ROUNDS" "$SECS" "$FLOWS" <<'PY'
import json, statistics, sys
out, rounds, secs, flows = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
med = {}
print(f"tcp-stream, {flows} flow(s), loopback, {secs} s, {rounds} alternating rounds")
for k in ("with", "without"):
    g = [json.load(open(f"{out}/{k}.{r}.json"))["summary"]["throughput_bps"] / 1e9 for r in range(1, rounds + 1)]
    med[k] = statistics.median(g)
    print(f"{k + ' CPU measurement':<24} median {med[k]:6.2f} Gbit/s   runs {' '.join(f'{x:.2f}' for x in g)}")
print(f"ratio with/without: {med['with'] / med['without']:.3f}")
PY
