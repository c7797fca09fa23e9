#!/usr/bin/env bash
# Side-by-side connection rate: netrig tcp-crr (1 flow, 1-byte request and
# response, a new connection per transaction) vs netperf TCP_CRR and neper
# tcp_crr (1 flow, 1 thread), alternating runs, medians and ratios paired by round; service demand (µs of CPU per
# transaction, both ends: on loopback each end's CPU is the whole machine's) of netrig
# and netperf (-c -C). Each peer is compared with netrig in the peer's own close order
# (which end closes first and keeps the TIME_WAIT): netperf's netserver closes first
# (netrig --close-first responder), neper's client does (netrig's default, requester).
# netperf's client also binds each connection to the next port of 5000-65535 (its -p)
# instead of letting connect() pick one: the like-for-like netrig run does the same
# (--local-ports 5000-65535); the run with the kernel's pick is shown beside it.
# neper's client closes with SO_LINGER 0 unless given --time-wait: a reset, not a FIN,
# and no TIME_WAIT anywhere. netrig's default is compared with `tcp_crr --time-wait`
# (a graceful close, TIME_WAIT on the client), and `netrig --close-first requester-reset`
# with neper's default.
#
#   bench/tcp-crr-vs-peers.sh [ROUNDS=3] [SECONDS=3] [NETRIG_ARGS (every netrig run; not --close-first)...]
#   NS_PORTS="LOW HIGH" bench/tcp-crr-vs-peers.sh ...  # each namespace's ephemeral port range;
#                                          # default 1024 65535, NS_PORTS= for the kernel's own
#   PIN=0 bench/tcp-crr-vs-peers.sh ...   # every tool's both ends on CPU 0 (netrig --cpus/--remote-cpus,
#                                          # netperf -T, neper under taskset): bound by CPU per connection,
#                                          # not by the wake-up chain (docs/RESULTS.md)
#
# Each run goes in a fresh network namespace (bench/lib.sh, fresh_ns): a run's TIME_WAIT
# sockets would otherwise slow the next run's connects, whichever tool it is. Its ephemeral
# port range is widened to 1024-65535: with the client closing first, a port may go again only
# a second after its TIME_WAIT began, and with the kernel's 32768-60999 (connect() keeping to
# its 14,116 even ports) every tool's rate stops at about 14,100/s, the range's, not the
# tool's (netrig says so: docs/RESULTS.md, "the local-port ceiling").
#
# Needs: root, iproute2, netperf/netserver and neper's tcp_crr on PATH (../shared/peers), a
# release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-3}
SECS=${2:-3}
shift 2 || true
need netperf; need netserver; need tcp_crr
build
export PIN=${PIN:-}
export NS_PORTS=${NS_PORTS-1024 65535}
NR_PIN=(); NP_PIN=(); TS=()
if [ -n "$PIN" ]; then
  NR_PIN=(--cpus "$PIN" --remote-cpus "$PIN"); NP_PIN=(-T "$PIN,$PIN"); TS=(taskset -c "$PIN")
fi
# Every run in a fresh namespace of its own (bench/lib.sh: no TIME_WAIT left by the last).
NSPORT=12865; NPORT=6387; CPORT=12866; DPORT=12867
# One run of round R: STEP names the tool and its workload.
crr_run() {
  local step=$1 r=$2
  case $step in
    netrig|netrig-rf|netrig-np|netrig-rst)
      local extra=()
      case $step in
        netrig-rf) extra=(--close-first responder) ;;
        netrig-np) extra=(--close-first responder --local-ports 5000-65535) ;;
        netrig-rst) extra=(--close-first requester-reset) ;;
      esac
      fresh_ns; in_ns_background $NETRIG serve -p "$NPORT" -q; sleep 0.5
      read -r b0 _ < <(cpu_ticks)
      in_ns $NETRIG tcp-crr -H 127.0.0.1 -p "$NPORT" -l "$SECS" "${extra[@]}" --json "${NR_PIN[@]}" "${NR_ARGS[@]}" \
        2>/dev/null > "$OUT/$step.$r.json"
      read -r b1 _ < <(cpu_ticks); echo "$b0 $b1" > "$OUT/$step.$r.cpu" ;;
    netperf)
      fresh_ns; in_ns_background netserver -D -p "$NSPORT"; sleep 0.5
      read -r b0 _ < <(cpu_ticks)
      in_ns netperf -H 127.0.0.1 -p "$NSPORT" -l "$SECS" -t TCP_CRR "${NP_PIN[@]}" -c -C -P 0 -- -r 1,1 \
        -o THROUGHPUT,LOCAL_SD,REMOTE_SD > "$OUT/netperf.$r.txt" 2>&1 || true
      read -r b1 _ < <(cpu_ticks); echo "$b0 $b1" > "$OUT/netperf.$r.cpu" ;;
    neper|neper-rst)
      # A neper server serves one run, then exits; both write logs where they run: in OUT.
      local tw=(); [ "$step" = neper ] && tw=(--time-wait)
      fresh_ns; in_ns_background sh -c "cd '$OUT' && exec ${TS[*]} tcp_crr -T 1 -F 1 -C $CPORT -P $DPORT -l $SECS ${tw[*]}"; sleep 0.5
      (cd "$OUT" && in_ns "${TS[@]}" tcp_crr -c -H 127.0.0.1 -T 1 -F 1 -C "$CPORT" -P "$DPORT" -l "$SECS" "${tw[@]}") \
        > "$OUT/$step.$r.txt" 2>&1 || true ;;
  esac
}
NR_ARGS=("$@")
for r in $(seq 1 "$ROUNDS"); do
  for step in $(rotated "$r" netrig netrig-rf netrig-np netrig-rst netperf neper-rst neper); do
    crr_run "$step" "$r"
  done
done
drop_ns
python3 - "$OUT" "$ROUNDS" "$SECS" <<'PY'
import json, os, re, statistics, sys
sys.path.insert(0, "bench")
from rounds import paired, per_tx
out, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def netrig(name):
    docs = [json.load(open(f"{out}/{name}.{r}.json"))["summary"] for r in range(1, rounds + 1)]
    return ([d["transactions_per_s"] for d in docs],
            [(d["service_demand"]["local"] or 0) + (d["service_demand"]["remote"] or 0) for d in docs])
n, _ = netrig("netrig")
nr, nrsd = netrig("netrig-rf")
nb, nbsd = netrig("netrig-np")
nx, _ = netrig("netrig-rst")
def netperf(r):
    # -o THROUGHPUT,LOCAL_SD,REMOTE_SD: the last line, comma-separated.
    return [float(x) for x in open(f"{out}/netperf.{r}.txt").read().strip().splitlines()[-1].split(",")]
def neper(r, name="neper"):
    m = re.search(r"^throughput=([0-9.]+)", open(f"{out}/{name}.{r}.txt").read(), re.M)
    return float(m.group(1))
np_ = [netperf(r) for r in range(1, rounds + 1)]
p = [x[0] for x in np_]
psd = [x[1] + x[2] for x in np_]
q = [neper(r) for r in range(1, rounds + 1)]
qr = [neper(r, "neper-rst") for r in range(1, rounds + 1)]
pin = os.environ.get("PIN")
where = f"every end pinned to CPU {pin}" if pin else "not pinned"
ports = os.environ.get("NS_PORTS") or "the kernel's"
print(f"tcp connection per transaction, 1 flow, 1 thread, 1 byte each way, loopback, {secs} s, {rounds} alternating rounds, {where}, "
      f"ephemeral ports {ports}")
for name, v in [("netrig --close-first responder --local-ports 5000-65535", nb),
                ("netperf TCP_CRR (responder first, ports 5000-65535)", p),
                ("netrig --close-first responder (kernel's ports)", nr),
                ("netrig (requester first)", n), ("neper tcp_crr --time-wait (requester first)", q),
                ("netrig --close-first requester-reset", nx),
                ("neper tcp_crr, default (requester resets)", qr)]:
    print(f"{name:55} median {statistics.median(v):9.0f} tps   spread {min(v):.0f}..{max(v):.0f}")
med = statistics.median
print(f"ratio netrig/netperf, netperf's workload (responder first, bound ports): {med(nb) / med(p):.3f}"
      f"   (kernel's ports: {med(nr) / med(p):.3f})")
print(f"ratio netrig/neper, requester first: {med(n) / med(q):.3f}"
      f"   requester resets (neper's default): {med(nx) / med(qr):.3f}")
print(f"service demand, both ends, us/tran, netperf's workload: netrig {med(nbsd):.1f}  netperf {med(psd):.1f}"
      f"  ratio {med(nbsd) / med(psd):.3f} (lower is better; kernel's ports: {med(nrsd) / med(psd):.3f})")
# CPU per transaction measured the same way for both tools (bench/rounds.py).
nb_cpu, p_cpu = per_tx(out, "netrig-np", nb, secs), per_tx(out, "netperf", p, secs)
print(f"CPU per transaction, whole machine (/proc/stat around each run), netperf's workload: "
      f"netrig {med(nb_cpu):.1f}  netperf {med(p_cpu):.1f} us  ratio {med(nb_cpu) / med(p_cpu):.3f} (lower is better)")
# The same, paired by round (bench/rounds.py).
print(f"paired ratio by round, netrig/netperf, netperf's workload: {paired(nb, p)}"
      f"   service demand {paired(nbsd, psd, True)}   CPU per transaction (/proc/stat) {paired(nb_cpu, p_cpu, True)}")
print(f"paired ratio by round, netrig/neper: requester first {paired(n, q)}"
      f"   requester resets {paired(nx, qr)}")
PY
