#!/usr/bin/env bash
# Side-by-side: netrig udp-stream vs iperf3 -u -b 0, 64-byte datagrams, one
# flow, alternating runs; compares datagrams per second delivered to the
# receiver (and sent), medians. Beside them, the kernel's floor on this host
# (bench/udp-floor.c, built with cc when there is one): a bare C sender of
# sendmmsg(2) batches of 64 and a receiver that reads until empty and sleeps
# 20 us, the most datagrams per second any tool could deliver here without
# GSO, so that a ratio against iperf3 reads against what is reachable.
#
#   bench/udp-stream-vs-iperf3.sh [ROUNDS=5] [SECONDS=4] [SIZE=64]
#
# Needs: iperf3, python3, a release build; cc for the floor.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-4}
SIZE=${3:-64}
iperf3_and_netrig
TOOLS="netrig nogso iperf3"
if command -v cc >/dev/null && cc -O2 -o "$OUT/udp-floor" bench/udp-floor.c; then
  TOOLS="$TOOLS floor"
  FPORT=$(free_port)
else
  echo "no cc: the kernel's floor (bench/udp-floor.c) is left out" >&2
fi
for r in $(seq 1 "$ROUNDS"); do
  for tool in $(rotated "$r" $TOOLS); do
    case $tool in
      netrig) $NETRIG udp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$SIZE" --json 2>/dev/null > "$OUT/netrig.$r.json" ;;
      nogso) $NETRIG udp-stream -H 127.0.0.1 -p "$NPORT" -l "$SECS" -m "$SIZE" --no-gso --json 2>/dev/null > "$OUT/nogso.$r.json" ;;
      iperf3) iperf3 -c 127.0.0.1 -p "$IPORT" -u -b 0 -l "$SIZE" -t "$SECS" -J > "$OUT/iperf3.$r.json" 2>/dev/null || true ;;
      floor) "$OUT/udp-floor" "$FPORT" "$SECS" "$SIZE" 64 20 > "$OUT/floor.$r.txt" 2>/dev/null || true ;;
    esac
  done
done
python3 - "$OUT" "$ROUNDS" "$SECS" "$SIZE" <<'PY'
import json, os, statistics, sys
out, rounds, secs, size = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
nr, ns, gr, gs, ir, isent, fr, fs = [], [], [], [], [], [], [], []
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
    if os.path.exists(f"{out}/floor.{r}.txt"):
        w = open(f"{out}/floor.{r}.txt").read().split()
        if len(w) == 6:
            fs.append(int(w[1]) / float(w[5]))
            fr.append(int(w[3]) / float(w[5]))
med = statistics.median
print(f"udp stream, 1 flow, {size}-byte datagrams, as fast as possible, loopback, {secs:g} s, {rounds} alternating rounds")
print(f"netrig   received {med(nr)/1e3:8.1f} k datagrams/s (sent {med(ns)/1e3:8.1f} k/s)  runs {' '.join(f'{x/1e3:.0f}' for x in nr)}")
print(f"netrig --no-gso received {med(gr)/1e3:8.1f} k datagrams/s (sent {med(gs)/1e3:8.1f} k/s)  runs {' '.join(f'{x/1e3:.0f}' for x in gr)}")
print(f"iperf3   received {med(ir)/1e3:8.1f} k datagrams/s (sent {med(isent)/1e3:8.1f} k/s)  runs {' '.join(f'{x/1e3:.0f}' for x in ir)}")
if fr:
    print(f"kernel floor    received {med(fr)/1e3:8.1f} k datagrams/s (sent {med(fs)/1e3:8.1f} k/s)  runs {' '.join(f'{x/1e3:.0f}' for x in fr)}  (bench/udp-floor.c: sendmmsg of 64, reader sleeping 20 us when empty)")
print(f"ratio received netrig/iperf3: {med(nr) / med(ir):.2f} (GSO/GRO), {med(gr) / med(ir):.2f} (--no-gso)")
if fr:
    print(f"ratio received kernel floor/iperf3: {med(fr) / med(ir):.2f}; netrig --no-gso/kernel floor: {med(gr) / med(fr):.2f}")
PY
