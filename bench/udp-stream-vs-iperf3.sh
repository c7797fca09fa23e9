#!/usr/bin/env bash
# Side-by-side: netrig udp-stream vs iperf3 -u -b 0, 64-byte datagrams, one
# flow, alternating runs; compares datagrams per second delivered to the
# receiver (and sent), medians.
#
#   bench/udp-stream-vs-iperf3.sh [ROUNDS=5] [SECONDS=4] [SIZE=64]
#
# Needs: iperf3, python3, a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-4}
SIZE=${3:-64}
iperf3_and_netrig
for r in $(seq 1 "$ROUNDS"); do
  for tool in $(rotated "$r" netrig nogso iperf3); do
    case $tool in
      netrig) $NETRIG udp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$SIZE" --json 2>/dev/null > "$OUT/netrig.$r.json" ;;
      nogso) $NETRIG udp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$SIZE" --no-gso --json 2>/dev/null > "$OUT/nogso.$r.json" ;;
      iperf3) iperf3 -c 127.0.0.1 -p "$IPORT" -u -b 0 -l "$SIZE" -t "$SECS" -J > "$OUT/iperf3.$r.json" 2>/dev/null || true ;;
    esac
  done
done
python3 - "$OUT" "$ROUNDS" "$SECS" "$SIZE" <<'PY'
import json, statistics, sys
out, rounds, secs, size = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
nr, ns, gr, gs, ir, isent = [], [], [], [], [], []
for r in range(1, rounds + 1):
    for name, rx, tx in (("netrig", nr, ns), ("nogso", gr, gs)):
        d = json.load(open(f"{out}/{name}.{r}.json"))
        u = d["summary"]["udp"]
        el = d["summary"]["elapsed_s"]
        rx.append(u["received_datagrams"] / el)
        tx.append(u["sent_datagrams"] / el)
    e = json.load(open(f"{out}/iperf3.{r}.json"))["end"]["sum"]
    ir.append((e["packets"] - e["lost_packets"]) / e["seconds"])
    isent.append(e["packets"] / e["seconds"])
med = statistics.median
print(f"udp stream, 1 flow, {size}-byte datagrams, as fast as possible, loopback, {secs:g} s, {rounds} alternating rounds")
print(f"netrig   received {med(nr)/1e3:8.1f} k datagrams/s (sent {med(ns)/1e3:8.1f} k/s)  runs {' '.join(f'{x/1e3:.0f}' for x in nr)}")
print(f"netrig --no-gso received {med(gr)/1e3:8.1f} k datagrams/s (sent {med(gs)/1e3:8.1f} k/s)  runs {' '.join(f'{x/1e3:.0f}' for x in gr)}")
print(f"iperf3   received {med(ir)/1e3:8.1f} k datagrams/s (sent {med(isent)/1e3:8.1f} k/s)  runs {' '.join(f'{x/1e3:.0f}' for x in ir)}")
print(f"ratio received netrig/iperf3: {med(nr) / med(ir):.2f} (GSO/GRO), {med(gr) / med(ir):.2f} (--no-gso)")
PY
