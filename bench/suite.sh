#!/usr/bin/env bash
# The side-by-side suite (#12): every comparison in bench/ that has its peers installed, one after
# another, each in alternating rounds with medians, then the ratios together. Each comparison uses
# the same message sizes, flows and threads on both sides and says so in its own table.
#
#   PATH=../shared/peers:$PATH bench/suite.sh [ROUNDS=3] [SECONDS=3]
#
# A comparison whose peer is missing is skipped with its reason. tcp-stream (against iperf3,
# netperf and nuttcp) runs twice: with the
# host's congestion control (BBR here, which on loopback without fq paces inside TCP and lands the
# tools in different regimes) and with cubic, and with 4 flows against iperf3 -P 4; tcp-bidir
# (cubic) against iperf3 --bidir, with netrig's senders unbounded (--notsent-lowat off) beside
# them; tcp-crr with 1, 4
# and 64 flows. Not run here, for time: 10,000 and 19,000 flows
# against neper (bench/rr-many-flows.sh takes a list of flow counts). The 64-byte UDP table
# carries the kernel's floor on this host beside the peers (bench/udp-floor.c: a bare sendmmsg
# loop, whose sending CPU is 99 % the kernel's per-datagram work), and the request/response
# tables a bare loop of blocking calls (bench/rr-bare-loop.c), both built with cc.
# Run it on a quiet machine: no builds or other tests beside it (and with
# kernel.sched_autogroup_enabled=0, `nice` really yields).
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-3}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cargo build --release -q -p netrig || exit 1
run() {
  local name=$1; shift
  echo "== $name"
  if "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"; then
    cat "$OUT/$name.txt"
  else
    echo "skipped or failed: $(tail -n 1 "$OUT/$name.err")" | tee "$OUT/$name.txt"
  fi
  echo
}
run tcp-stream bench/tcp-stream-vs-peers.sh "$ROUNDS" "$SECS"
run tcp-stream-cubic bench/tcp-stream-vs-peers.sh "$ROUNDS" "$SECS" 128K cubic
run tcp-stream-4-flows bench/tcp-stream-vs-peers.sh "$ROUNDS" "$SECS" 128K "" 4
run tcp-bidir bench/tcp-bidir-vs-iperf3.sh "$ROUNDS" "$SECS" 128K cubic
run rr bench/rr-vs-peers.sh "$ROUNDS" "$SECS"
run tcp-crr bench/tcp-crr-vs-peers.sh "$ROUNDS" "$SECS"
run tcp-crr-4-flows bench/tcp-crr-many-flows.sh "$ROUNDS" "$SECS" 4 2
# 64 flows on 2 threads: where both tools are CPU-bound and netrig's one shared listener costs
# (bench/README.md, "Run alone"); in the suite so that its table shows the weakest row too.
run tcp-crr-64-flows bench/tcp-crr-many-flows.sh "$ROUNDS" "$SECS" 64 2
run udp-64 bench/udp-stream-vs-iperf3.sh "$ROUNDS" "$SECS" 64
run rr-1000-flows bench/rr-many-flows.sh 1000 "$SECS" 2 "$ROUNDS"
echo "== ratios (netrig / peer; medians of $ROUNDS alternating rounds of $SECS s)"
grep -H -i "ratio" "$OUT"/*.txt | sed "s|$OUT/||; s|\.txt:| |"
