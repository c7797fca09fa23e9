#!/usr/bin/env bash
# Side-by-side: request/response, 1 flow, 1-byte request and response, closed loop, loopback.
# netrig tcp-rr / udp-rr against netperf TCP_RR / UDP_RR (with -c -C: service demand, µs of CPU
# per transaction on each end, as netperf computes it from /proc/stat) and sockperf ping-pong
# (round trips/s = 1e6 / (2 x its avg half-round-trip latency)), alternating runs, medians; and
# netrig --busy-wait, both ends polling their sockets instead of sleeping (the peers sleep: its
# ratio compares modes, as sockperf's users do, not like with like). Beside them, a bare C loop
# (bench/rr-bare-loop.c, built with cc when there is one) of blocking send(2) and recv(2) on each
# end: what netperf's loop does, with nothing around it.
#
#   PATH=../shared/peers:$PATH bench/rr-vs-peers.sh [ROUNDS=5] [SECONDS=3] [PROTO=tcp|udp|both]
#
# Needs: netperf/netserver (../shared/peers), sockperf (apt-get install sockperf), python3; cc for
# the bare loop.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-3}
PROTO=${3:-both}
need netperf; need netserver; need sockperf
build
NPORT=$(free_port); PPORT=$(free_port); STPORT=$(free_port); SUPORT=$(free_port)
background $NETRIG serve -p "$NPORT" -q
background netserver -D -p "$PPORT"
background sockperf sr --tcp -i 127.0.0.1 -p "$STPORT"
background sockperf sr -i 127.0.0.1 -p "$SUPORT"
TOOLS="netrig busy netperf sockperf"
if command -v cc >/dev/null && cc -O2 -o "$OUT/rr-bare-loop" bench/rr-bare-loop.c; then
  TOOLS="$TOOLS bare"
else
  echo "no cc: the bare loop (bench/rr-bare-loop.c) is left out" >&2
fi
sleep 1
protos=(tcp udp); [ "$PROTO" != both ] && protos=("$PROTO")
for p in "${protos[@]}"; do
  P=${p^^}
  for r in $(seq 1 "$ROUNDS"); do
    for tool in $(rotated "$r" $TOOLS); do
      case $tool in
        netrig) $NETRIG "$p-rr" -H 127.0.0.1 -p "$NPORT" -l "$SECS" --json 2>/dev/null > "$OUT/$p.netrig.$r.json" ;;
        busy) $NETRIG "$p-rr" -H 127.0.0.1 -p "$NPORT" -l "$SECS" --busy-wait --json 2>/dev/null > "$OUT/$p.busy.$r.json" ;;
        netperf) netperf -H 127.0.0.1 -p "$PPORT" -t "${P}_RR" -l "$SECS" -c -C -P 0 -- -r 1,1 \
          -o THROUGHPUT,LOCAL_SD,REMOTE_SD > "$OUT/$p.netperf.$r.txt" 2>&1 || true ;;
        sockperf)
          if [ "$p" = tcp ]; then sp=(--tcp -p "$STPORT"); else sp=(-p "$SUPORT"); fi
          sockperf pp "${sp[@]}" -i 127.0.0.1 -t "$SECS" -m 14 > "$OUT/$p.sockperf.$r.txt" 2>&1 || true ;;
        bare) "$OUT/rr-bare-loop" "$p" "$(free_port)" "$SECS" > "$OUT/$p.bare.$r.txt" 2>/dev/null || true ;;
      esac
    done
  done
done
python3 - "$OUT" "$ROUNDS" "$SECS" "${protos[@]}" <<'PY'
import json, os, re, statistics as st, sys
out, rounds, secs, protos = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
med = lambda v: st.median(v) if v else float("nan")
for p in protos:
    n, nsd = [], []
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/{p}.netrig.{r}.json"))
        n.append(d["summary"]["transactions_per_s"])
        sd = d["summary"]["service_demand"]
        nsd.append((sd["local"] or 0) + (sd["remote"] or 0))
    b, bsd = [], []
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/{p}.busy.{r}.json"))
        b.append(d["summary"]["transactions_per_s"])
        sd = d["summary"]["service_demand"]
        bsd.append((sd["local"] or 0) + (sd["remote"] or 0))
    q, qsd = [], []
    for r in range(1, rounds + 1):
        t = open(f"{out}/{p}.netperf.{r}.txt").read().strip().splitlines()
        f = t[-1].split(",") if t else []
        if len(f) == 3:
            q.append(float(f[0])); qsd.append(float(f[1]) + float(f[2]))
    s = []
    for r in range(1, rounds + 1):
        m = re.search(r"avg-latency=([0-9.]+)", open(f"{out}/{p}.sockperf.{r}.txt").read())
        if m: s.append(1e6 / (2 * float(m.group(1))))
    fl = []
    for r in range(1, rounds + 1):
        path = f"{out}/{p}.bare.{r}.txt"
        m = re.search(r"transactions (\d+) seconds ([0-9.]+)$", open(path).read().strip()) if os.path.exists(path) else None
        if m: fl.append(int(m.group(1)) / float(m.group(2)))
    print(f"{p} request/response, 1 flow, 1 byte each way (sockperf: its 14-byte minimum), loopback, {secs} s, {rounds} alternating rounds")
    print(f"  netrig {p}-rr        median {med(n):9.0f} trans/s   SD both ends {med(nsd):7.2f} us/tran   runs {' '.join(f'{x:.0f}' for x in n)}")
    print(f"  netrig --busy-wait   median {med(b):9.0f} trans/s   SD both ends {med(bsd):7.2f} us/tran   runs {' '.join(f'{x:.0f}' for x in b)}")
    print(f"  netperf {p.upper()}_RR      median {med(q):9.0f} trans/s   SD both ends {med(qsd):7.2f} us/tran   runs {' '.join(f'{x:.0f}' for x in q)}")
    print(f"  sockperf pp {p:<4}     median {med(s):9.0f} round trips/s           runs {' '.join(f'{x:.0f}' for x in s)}")
    if fl:
        print(f"  bare C loop          median {med(fl):9.0f} trans/s                              runs {' '.join(f'{x:.0f}' for x in fl)}  (bench/rr-bare-loop.c: blocking send/recv, nothing else)")
    print(f"  {p}-rr ratio netrig/netperf: {med(n) / med(q):.3f}   service demand ratio netrig/netperf: {med(nsd) / med(qsd):.3f} (lower is better)")
    print(f"  {p}-rr ratio netrig/sockperf: {med(n) / med(s):.3f}")
    print(f"  {p}-rr ratio netrig --busy-wait/sockperf (modes, not like with like): {med(b) / med(s):.3f}")
    if fl:
        print(f"  {p}-rr ratio netrig/bare C loop: {med(n) / med(fl):.3f}; netperf/bare C loop: {med(q) / med(fl):.3f}")
PY
