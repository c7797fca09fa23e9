#!/usr/bin/env bash
# Side-by-side connection rate without data: netrig tcp-cc (1 flow, a new connection per
# transaction, the 32-byte greeting alone) vs netperf TCP_CC (1 flow), alternating runs,
# medians and ratios paired by round; service demand (µs of CPU per transaction, both ends:
# on loopback each end's CPU is the whole machine's) of each, and the machine's CPU per
# transaction from /proc/stat around each run, measured the same way for both.
# Both close in the same order: the server end first (netserver closes right after accept;
# netrig's agent once it has read the greeting), the client counting the transaction when it
# sees that close. netperf's client also binds each connection to the next port of 5000-65535
# (its -p) instead of letting connect() pick one: the like-for-like netrig run does the same
# (--local-ports 5000-65535); the run with the kernel's pick is shown beside it.
#
#   bench/tcp-cc-vs-netperf.sh [ROUNDS=3] [SECONDS=3] [NETRIG_ARGS (every netrig run)...]
#   NS_PORTS="LOW HIGH" bench/tcp-cc-vs-netperf.sh ...  # each namespace's ephemeral port range;
#                                          # default 1024 65535, NS_PORTS= for the kernel's own
#   PIN=0 bench/tcp-cc-vs-netperf.sh ...  # every tool's both ends on CPU 0 (netrig --cpus/--remote-cpus,
#                                          # netperf -T)
#
# Each run goes in a fresh network namespace (bench/lib.sh, fresh_ns): a run's TIME_WAIT
# sockets would otherwise slow the next run's connects, whichever tool it is.
#
# Needs: root, iproute2, netperf/netserver on PATH (../shared/peers), a release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-3}
SECS=${2:-3}
shift 2 || true
need netperf; need netserver
build
export PIN=${PIN:-}
export NS_PORTS=${NS_PORTS-1024 65535}
NR_PIN=(); NP_PIN=()
if [ -n "$PIN" ]; then
  NR_PIN=(--cpus "$PIN" --remote-cpus "$PIN"); NP_PIN=(-T "$PIN,$PIN")
fi
NSPORT=12865; NPORT=6387
# One run of round R: STEP names the tool and its workload.
cc_run() {
  local step=$1 r=$2
  case $step in
    netrig|netrig-np)
      local extra=()
      [ "$step" = netrig-np ] && extra=(--local-ports 5000-65535)
      fresh_ns; in_ns_background $NETRIG serve -p "$NPORT" -q; sleep 0.5
      read -r b0 _ < <(cpu_ticks)
      in_ns $NETRIG tcp-cc -H 127.0.0.1 -p "$NPORT" -l "$SECS" "${extra[@]}" --json "${NR_PIN[@]}" "${NR_ARGS[@]}" \
        2>/dev/null > "$OUT/$step.$r.json"
      read -r b1 _ < <(cpu_ticks); echo "$b0 $b1" > "$OUT/$step.$r.cpu" ;;
    netperf)
      fresh_ns; in_ns_background netserver -D -p "$NSPORT"; sleep 0.5
      read -r b0 _ < <(cpu_ticks)
      # (TCP_CC is not an omni test: no -o; its classic line, without headers.)
      in_ns netperf -H 127.0.0.1 -p "$NSPORT" -l "$SECS" -t TCP_CC "${NP_PIN[@]}" -c -C -P 0 \
        > "$OUT/netperf.$r.txt" 2>&1 || true
      read -r b1 _ < <(cpu_ticks); echo "$b0 $b1" > "$OUT/netperf.$r.cpu" ;;
  esac
}
NR_ARGS=("$@")
for r in $(seq 1 "$ROUNDS"); do
  for step in $(rotated "$r" netrig netrig-np netperf); do
    cc_run "$step" "$r"
  done
done
drop_ns
python3 - "$OUT" "$ROUNDS" "$SECS" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, "bench")
from rounds import paired, per_tx
out, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
med = statistics.median
def netrig(name):
    docs = [json.load(open(f"{out}/{name}.{r}.json"))["summary"] for r in range(1, rounds + 1)]
    return ([d["transactions_per_s"] for d in docs],
            [(d["service_demand"]["local"] or 0) + (d["service_demand"]["remote"] or 0) for d in docs],
            [d["latency_us"]["p50"] for d in docs])
n, nsd, nlat = netrig("netrig")
nb, nbsd, nblat = netrig("netrig-np")
def netperf(r):
    # The classic line: send and receive socket sizes, request and response sizes, elapsed s,
    # transactions/s, local and remote CPU %, local and remote service demand (us/tran).
    f = [float(x) for x in open(f"{out}/netperf.{r}.txt").read().split("\n")[0].split()]
    return [f[5], f[8], f[9]]
np_ = [netperf(r) for r in range(1, rounds + 1)]
p = [x[0] for x in np_]
psd = [x[1] + x[2] for x in np_]
pin = os.environ.get("PIN")
where = f"every end pinned to CPU {pin}" if pin else "not pinned"
ports = os.environ.get("NS_PORTS") or "the kernel's"
print(f"tcp connect/close, 1 flow, no data, loopback, {secs} s, {rounds} alternating rounds, {where}, "
      f"ephemeral ports {ports}")
for name, v in [("netrig tcp-cc --local-ports 5000-65535", nb), ("netperf TCP_CC (ports 5000-65535)", p),
                ("netrig tcp-cc (kernel's ports)", n)]:
    print(f"{name:45} median {med(v):9.0f} tps   spread {min(v):.0f}..{max(v):.0f}")
print(f"netrig latency p50: {med(nblat):.1f} us (bound ports), {med(nlat):.1f} us (kernel's)")
print(f"ratio netrig/netperf, netperf's workload (bound ports): {med(nb) / med(p):.3f}"
      f"   (kernel's ports: {med(n) / med(p):.3f})")
print(f"service demand, both ends, us/tran: netrig {med(nbsd):.1f}  netperf {med(psd):.1f}"
      f"  ratio {med(nbsd) / med(psd):.3f} (lower is better)")
# Both tools' CPU per transaction measured the same way (bench/rounds.py).
nb_cpu, p_cpu = per_tx(out, "netrig-np", nb, secs), per_tx(out, "netperf", p, secs)
print(f"CPU per transaction, whole machine (/proc/stat around each run): "
      f"netrig {med(nb_cpu):.1f}  netperf {med(p_cpu):.1f} us  ratio {med(nb_cpu) / med(p_cpu):.3f} (lower is better)")
# The same, paired by round (bench/rounds.py).
print(f"paired ratio by round, netrig/netperf (bound ports): {paired(nb, p)}"
      f"   kernel's ports {paired(n, p)}   service demand {paired(nbsd, psd, True)}"
      f"   CPU per transaction (/proc/stat) {paired(nb_cpu, p_cpu, True)}")
PY
