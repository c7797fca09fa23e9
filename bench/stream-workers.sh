#!/usr/bin/env bash
# How many worker threads a multi-flow tcp-stream wants: netrig tcp-stream -P FLOWS with the
# default workers (one per CPU on each end) against -T FLOWS (a worker per flow on each end, as
# iperf3 3.21 has a thread per stream), for each flow count, alternating, medians; throughput and
# whole-machine CPU per byte (/proc/stat, both ends on this host). Not a test: a measurement
# for choosing the default (CHANGELOG, #12).
#
#   bench/stream-workers.sh [ROUNDS=3] [SECONDS=3] [FLOW COUNTS="2 4 8 16"]
# (With 2 flows on 2 CPUs both runs are the same configuration: their ratio shows the noise.)
#
# Needs: python3, a release build (built here).
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-3}
SECS=${2:-3}
COUNTS=${3:-2 4 8 16}
build
NPORT=$(free_port)
background $NETRIG serve -p "$NPORT" -q --max-workers 64 --max-threads 128
sleep 1
for p in $COUNTS; do
  for r in $(seq 1 "$ROUNDS"); do
    for t in $(rotated "$r" default perflow); do
      w=(); [ "$t" = perflow ] && w=(-T "$p")
      read -r b0 _ < <(cpu_ticks)
      $NETRIG tcp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -P "$p" "${w[@]}" --json > "$OUT/$p.$t.$r.json" 2>/dev/null || true
      read -r b1 _ < <(cpu_ticks)
      echo "$b0 $b1" > "$OUT/$p.$t.$r.cpu"
    done
  done
done
python3 - "$OUT" "$ROUNDS" "$SECS" $COUNTS <<'PY'
import json, os, statistics, sys
out, rounds, secs, counts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
hz = os.sysconf("SC_CLK_TCK")
cpus = os.cpu_count()
print(f"tcp-stream, loopback, 128K messages, {secs} s, {rounds} alternating rounds, {cpus} CPUs; "
      f"default workers ({cpus} per end) against one per flow (-T FLOWS)")
print(f"{'flows':>5} {'default Gbit/s':>15} {'per flow Gbit/s':>16} {'ratio':>6} {'CPU/byte ratio':>15}  runs (default | per flow)")
for p in counts:
    med = {}
    runs = {}
    for t in ("default", "perflow"):
        g, c = [], []
        for r in range(1, rounds + 1):
            try:
                s = json.load(open(f"{out}/{p}.{t}.{r}.json"))["summary"]
            except (ValueError, KeyError, FileNotFoundError):
                continue
            b0, b1 = map(float, open(f"{out}/{p}.{t}.{r}.cpu").read().split())
            g.append(s["throughput_bps"] / 1e9)
            c.append((b1 - b0) / hz / (s["bytes"] / 2**30))
        if g:
            med[t] = (statistics.median(g), statistics.median(c))
            runs[t] = " ".join(f"{x:.1f}" for x in g)
    if len(med) == 2:
        d, q = med["default"], med["perflow"]
        print(f"{p:>5} {d[0]:>15.2f} {q[0]:>16.2f} {q[0] / d[0]:>6.3f} {q[1] / d[1]:>15.3f}  "
              f"{runs['default']} | {runs['perflow']}")
PY
