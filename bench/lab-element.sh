#!/usr/bin/env bash
# The ceiling of netrig's path element (docs/LAB.md, "The path element"): the same two-host lab
# built twice, once with a plain veth link and once with the element on the link at zero
# configured delay (`delay = "0ms"`, `element = true`), and through each:
#   - udp-stream of 64-byte datagrams (--no-gso, unpaced): datagrams per second received;
#   - udp-stream of 1472-byte datagrams (1514-byte frames, --no-gso, unpaced): Mbit/s received;
#   - tcp-stream (TSO super-frames cross the element as one frame each): Mbit/s;
#   - tcp-rr: the median round trip; the element's added latency is the difference;
#   - then paced UDP through the element (64 B at 25 and 50 Mbit/s, 1472 B at 500 and 800 Mbit/s),
#     beside the element's counters (received, forwarded, dropped unread).
# Then the two paths the issue names, through the element with htb for the rate:
#   - 155 Mbit/s, 58 ms each way (116 ms round trip), one TCP flow with a 4 MB window (-s/-S 4M),
#     12 s of which the first 2 s are left out (slow start at 116 ms takes about a second);
#   - 1 Gbit/s, 5 ms each way (10 ms round trip), the same.
# Then the same two paths with the element's own rate and queue (`element_rate = true`, its
# default queue: 50 ms of the rate), and the ceiling of that queue: UDP offered above a 1 Gbit/s
# element rate (1472-byte datagrams) and 64-byte datagrams through it, beside its counters.
# PATHS_ONLY=1 skips the ceiling; QUEUE_ONLY=1 runs only the element's own rate.
# NETRIG_BIN=target/debug/netrig uses that binary (no release build).
#
#   bench/lab-element.sh [ROUNDS=3] [SECONDS=3]
#
# Needs: root, iproute2, a release build. Traffic only inside the labs' namespaces.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-3}
SECS=${2:-3}
if [ -n "${NETRIG_BIN:-}" ]; then NETRIG=$NETRIG_BIN; else build; fi
LAB_PLAIN=bench-plain-$$
LAB_EL=bench-el-$$
trap '$NETRIG lab down "$LAB_PLAIN" >/dev/null 2>&1 || true; $NETRIG lab down "$LAB_EL" >/dev/null 2>&1 || true; rm -rf "$OUT"' EXIT

lab_file() { # NAME SHAPE_LINES
  cat > "$OUT/$1.toml" <<EOF
[lab]
witness = false
[lab.hosts.a]
[lab.hosts.b]
[[lab.links]]
ends = ["a", "b"]
$2
EOF
  echo "$OUT/$1.toml"
}

j() { python3 -c "import json,sys; v=json.load(sys.stdin); print($1)"; }
rr() { $NETRIG lab exec "$1" a -- netrig tcp-rr -H 198.18.0.2 -l "$SECS" --json | j "round(v['summary']['latency_us']['p50'],1)"; }
udp() { $NETRIG lab exec "$1" a -- netrig udp-stream -H 198.18.0.2 -l "$SECS" -m "$2" --no-gso --json \
  | j "'%d datagrams/s received, %.1f Mbit/s, loss %.2f %%' % (v['summary']['udp']['received_datagrams']/v['summary']['elapsed_s'], v['summary']['throughput_bps']/1e6, v['summary']['udp']['loss_pct'])"; }
tcp() { $NETRIG lab exec "$1" a -- netrig tcp-stream -H 198.18.0.2 -l "$SECS" "${@:2}" --json | j "'%.1f Mbit/s' % (v['summary']['throughput_bps']/1e6)"; }

if [ -z "${PATHS_ONLY:-}" ] && [ -z "${QUEUE_ONLY:-}" ]; then
$NETRIG lab up "$(lab_file plain "")" --name "$LAB_PLAIN" >/dev/null
$NETRIG lab up "$(lab_file el "[lab.links.shape.a]
element = true
delay = \"0ms\"
[lab.links.shape.b]
element = true
delay = \"0ms\"")" --name "$LAB_EL" >/dev/null
echo "ceiling, ${SECS} s runs, rounds alternating plain veth / through the element:"
for r in $(seq 1 "$ROUNDS"); do
  for lab in $(rotated "$r" "$LAB_PLAIN" "$LAB_EL"); do
    echo "round $r $lab: tcp-rr p50 $(rr "$lab") µs; 64 B: $(udp "$lab" 64); 1472 B: $(udp "$lab" 1472); tcp-stream: $(tcp "$lab")"
  done
done
echo "paced, through the element (udp-stream --no-gso -b RATE; compare its loss with the element's counters below):"
for spec in "64 25M" "64 50M" "1472 500M" "1472 800M"; do
  set -- $spec
  echo "  $1 B at $2: $($NETRIG lab exec "$LAB_EL" a -- netrig udp-stream -H 198.18.0.2 -l "$SECS" -m "$1" -b "$2" --no-gso --json \
    | j "'sent %d/s, received %d/s, lost %d' % (v['summary']['udp']['sent_datagrams']/v['summary']['elapsed_s'], v['summary']['udp']['received_datagrams']/v['summary']['elapsed_s'], v['summary']['udp']['lost_datagrams'])")"
done
$NETRIG lab status "$LAB_EL" | grep element
$NETRIG lab down "$LAB_PLAIN" >/dev/null; $NETRIG lab down "$LAB_EL" >/dev/null
fi

path() { # RATE ONE_WAY
  local name=bench-path-$$
  $NETRIG lab up "$(lab_file path "[lab.links.shape.a]
rate = \"$1\"
element = true
delay = \"$2\"
[lab.links.shape.b]
element = true
delay = \"$2\"")" --name "$name" >/dev/null
  echo "$1 at $2 each way: tcp-rr p50 $(rr "$name") µs; one TCP flow, 4 MB window, 10 s after 2 s of warm-up: $(SECS=12 tcp "$name" --omit 2 -s 4M -S 4M)"
  $NETRIG lab status "$name" | grep element
  $NETRIG lab down "$name" >/dev/null
}
if [ -z "${QUEUE_ONLY:-}" ]; then
path 155M 58ms
path 1G 5ms
fi

qpath() { # RATE ONE_WAY: the element serves the rate from its own queue
  local name=bench-qpath-$$
  $NETRIG lab up "$(lab_file qpath "[lab.links.shape.a]
rate = \"$1\"
element_rate = true
delay = \"$2\"
[lab.links.shape.b]
element = true
delay = \"$2\"")" --name "$name" >/dev/null
  echo "$1 by the element's own queue, $2 each way: tcp-rr p50 $(rr "$name") µs; one TCP flow, 4 MB window, 10 s after 2 s of warm-up: $(SECS=12 tcp "$name" --omit 2 -s 4M -S 4M)"
  $NETRIG lab status "$name" | grep -A2 "element a"
  $NETRIG lab down "$name" >/dev/null
}
qpath 155M 58ms
qpath 1G 5ms

name=bench-qceil-$$
$NETRIG lab up "$(lab_file qceil "[lab.links.shape.a]
rate = \"1G\"
element_rate = true")" --name "$name" >/dev/null
echo "the element's own queue at 1 Gbit/s, no delay, UDP offered (udp-stream --no-gso -b RATE):"
for spec in "1472 1200M" "64 100M" "64 0"; do
  set -- $spec
  echo "  $1 B at $2: $($NETRIG lab exec "$name" a -- netrig udp-stream -H 198.18.0.2 -l "$SECS" -m "$1" -b "$2" --no-gso --json \
    | j "'sent %d/s, received %d/s (%.1f Mbit/s of payload), lost %d' % (v['summary']['udp']['sent_datagrams']/v['summary']['elapsed_s'], v['summary']['udp']['received_datagrams']/v['summary']['elapsed_s'], v['summary']['throughput_bps']/1e6, v['summary']['udp']['lost_datagrams'])")"
  $NETRIG lab status "$name" | grep -A2 "element a" | sed 's/^/    /'
done
$NETRIG lab down "$name" >/dev/null
