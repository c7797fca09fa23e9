#!/usr/bin/env bash
# Side-by-side connection rate with several flows on several threads: netrig tcp-crr -P FLOWS
# -T THREADS against neper tcp_crr -F FLOWS -T THREADS, the same flows and threads on both ends
# of both tools, 1 byte each way, a new connection per transaction, alternating rounds, medians.
# Both in the client-closes-first order (netrig's default, neper's --time-wait) and in neper's
# default of a reset close (netrig --close-first requester-reset). netperf has one flow per
# process and is left out (bench/tcp-crr-vs-peers.sh compares it, one flow).
#
#   bench/tcp-crr-many-flows.sh [ROUNDS=3] [SECONDS=3] [FLOWS=4] [THREADS=2]
#
# Each run in a fresh namespace (bench/lib.sh) whose ephemeral port range is 1024-65535
# (NS_PORTS="LOW HIGH" to change it, NS_PORTS= for the kernel's): with the kernel's 32768-60999
# every tool stops at about 14,100 connections/s, the range's rate, not the tool's
# (docs/RESULTS.md, "The local-port ceiling").
#
# Needs: root, iproute2, neper's tcp_crr on PATH (../shared/peers), a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-3}
SECS=${2:-3}
F=${3:-4}
T=${4:-2}
need tcp_crr
build
export NS_PORTS=${NS_PORTS-1024 65535}
NPORT=6387; CPORT=12866; DPORT=12867
for r in $(seq 1 "$ROUNDS"); do
  for step in $(rotated "$r" netrig neper netrig-rst neper-rst); do
    case $step in
      netrig|netrig-rst)
        extra=(); [ "$step" = netrig-rst ] && extra=(--close-first requester-reset)
        fresh_ns; in_ns_background "$NETRIG" serve -p "$NPORT" -q; sleep 0.5
        in_ns "$NETRIG" tcp-crr -H 127.0.0.1 -p "$NPORT" -l "$SECS" -P "$F" -T "$T" "${extra[@]}" --json \
          2>/dev/null > "$OUT/$step.$r.json" || true ;;
      neper|neper-rst)
        tw=(); [ "$step" = neper ] && tw=(--time-wait)
        # A neper server serves one run, then exits; both write logs where they run: in OUT.
        fresh_ns; in_ns_background sh -c "cd '$OUT' && exec tcp_crr -T $T -F $F -C $CPORT -P $DPORT -l $SECS ${tw[*]}"
        sleep 0.5
        (cd "$OUT" && in_ns tcp_crr -c -H 127.0.0.1 -T "$T" -F "$F" -C "$CPORT" -P "$DPORT" -l "$SECS" "${tw[@]}") \
          > "$OUT/$step.$r.txt" 2>&1 || true ;;
    esac
  done
done
drop_ns
PORTS_SAID=${NS_PORTS:-host default}
python3 - "$OUT" "$ROUNDS" "$SECS" "$F" "$T" "$PORTS_SAID" <<'PY'
import json, re, statistics, sys
out, rounds, secs, flows, threads, ports = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
def netrig(name):
    v = []
    for r in range(1, rounds + 1):
        try:
            v.append(json.load(open(f"{out}/{name}.{r}.json"))["summary"]["transactions_per_s"])
        except (ValueError, KeyError, OSError):
            print(f"{name} round {r}: no result", file=sys.stderr)
    return v
def neper(name):
    v = []
    for r in range(1, rounds + 1):
        m = re.search(r"^throughput=([0-9.]+)", open(f"{out}/{name}.{r}.txt").read(), re.M)
        if m:
            v.append(float(m.group(1)))
        else:
            print(f"{name} round {r}: no result", file=sys.stderr)
    return v
print(f"tcp connection per transaction, {flows} flows on {threads} threads per end, 1 byte each way, loopback, "
      f"{secs} s, {rounds} alternating rounds, ephemeral ports {ports}")
rows = [("netrig tcp-crr (requester closes)", netrig("netrig")),
        ("neper tcp_crr --time-wait", neper("neper")),
        ("netrig --close-first requester-reset", netrig("netrig-rst")),
        ("neper tcp_crr, default (reset)", neper("neper-rst"))]
for name, v in rows:
    if v:
        print(f"{name:<40} median {statistics.median(v):9.0f} tps   spread {min(v):.0f}..{max(v):.0f}")
def ratio(a, b):
    return statistics.median(a) / statistics.median(b) if a and b else float("nan")
print(f"ratio netrig/neper, {flows} flows {threads} threads: requester closes {ratio(rows[0][1], rows[1][1]):.3f}   "
      f"reset close {ratio(rows[2][1], rows[3][1]):.3f}")
PY
