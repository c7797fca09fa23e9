#!/usr/bin/env bash
# Side-by-side: this tree's release build against another netrig binary
# (an earlier commit's build), each against its own agent on loopback,
# alternating rounds; medians of throughput, sent datagrams/s (UDP),
# transactions/s (request/response) and whole-machine CPU, and their ratios.
#
#   bench/builds-ab.sh OLD_NETRIG [ROUNDS=5] -- TEST [ARGS...]
#   e.g. (git worktree add /tmp/old 5c482aa && cd /tmp/old && cargo build --release)
#        bench/builds-ab.sh /tmp/old/target/release/netrig 5 -- udp-stream -l 3 -m 64 --no-gso
#
# Needs: root, iproute2, python3, a release build of this tree (built here).
. "$(dirname "$0")/lib.sh"
OLD=${1:?usage: bench/builds-ab.sh OLD_NETRIG [ROUNDS] -- TEST [ARGS...]}
shift
ROUNDS=5
if [ "${1:-}" != "--" ]; then ROUNDS=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "usage: bench/builds-ab.sh OLD_NETRIG [ROUNDS] -- TEST [ARGS...]" >&2; exit 2; }
build
# Each run in a fresh namespace with its own agent (bench/lib.sh: a run's
# TIME_WAIT sockets, tens of thousands after tcp-crr, would slow the next).
# The order alternates from round to round (bench/lib.sh, rotated): a machine that warms up
# or slows down over the rounds favours neither build.
for r in $(seq 1 "$ROUNDS"); do
  for b in $(rotated "$r" old new); do
    bin=$NETRIG; [ $b = old ] && bin=$OLD
    fresh_ns; in_ns_background "$bin" serve -p 6387 -q; sleep 0.5
    in_ns "$bin" "$@" -H 127.0.0.1 -p 6387 --json 2>/dev/null > "$OUT/$b.$r.json"
  done
done
drop_ns
python3 - "$OUT" "$ROUNDS" "$*" <<'PY'
import json, statistics, sys
out, rounds, args = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def figures(d):
    s = d["summary"]
    f = {"throughput Mbit/s": s["throughput_bps"] / 1e6 if s.get("throughput_bps") else None,
         "CPU local %": (s.get("cpu") or {}).get("local_pct")}
    if s.get("udp"):
        f["sent k datagrams/s"] = s["udp"]["sent_datagrams"] / s["elapsed_s"] / 1e3
        f["loss %"] = s["udp"]["loss_pct"]
    if s.get("transactions_per_s"):
        f["transactions/s"] = s["transactions_per_s"]
    sd = s.get("service_demand") or {}
    if sd.get("local") is not None and sd.get("remote") is not None:
        # Both ends' CPU per unit of work (netperf's service demand): lower is better.
        f[f"SD both {sd['unit']}"] = sd["local"] + sd["remote"]
    return f
runs = {"old": [], "new": []}
for r in range(1, rounds + 1):
    for k in runs:
        runs[k].append(figures(json.load(open(f"{out}/{k}.{r}.json"))))
print(f"netrig {args}: this tree (new) against OLD, {rounds} alternating rounds, medians")
for key in runs["new"][0]:
    o = [x[key] for x in runs["old"] if x.get(key) is not None]
    n = [x[key] for x in runs["new"] if x.get(key) is not None]
    if not o or not n:
        continue
    mo, mn = statistics.median(o), statistics.median(n)
    if key == "transactions/s" or key.startswith("throughput"):
        print(f"  {key} old rounds: {[round(x, 1) for x in o]}\n  {key} new rounds: {[round(x, 1) for x in n]}")
    ratio = f"{mn / mo:.2f}" if mo else "-"
    # Each round's new/old, then their median: the pairing removes the drift between rounds.
    pairs = [x[key] / y[key] for x, y in zip(runs["new"], runs["old"])
             if x.get(key) is not None and y.get(key)]
    # Rates: higher is better ("ahead"); CPU, loss and service demand: lower is.
    lower_better = key.startswith(("CPU", "loss", "SD"))
    word, better = ("lower", lambda p: p < 1) if lower_better else ("ahead", lambda p: p > 1)
    paired = f"{statistics.median(pairs):.3f} (new {word} in {sum(better(p) for p in pairs)} of {len(pairs)})" if pairs else "-"
    print(f"  {key:<20} old {mo:12.2f}  new {mn:12.2f}  new/old {ratio}  paired {paired}")
PY
