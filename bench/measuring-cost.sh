#!/usr/bin/env bash
# What measuring costs (#12): each measuring feature on and off, side by side, alternating runs,
# medians and ratios, for a stream (cubic: with BBR on loopback single-flow runs fall in two
# regimes, too far apart to see a 1 % cost) and request/response (transactions/s):
#   - CPU sampling: the default against --no-cpu (no /proc/stat on either end). Each end reads
#     /proc/stat and its threads' times at the window's edges (and at each interim report), never
#     inside the window: a difference beyond the rounds' spread would be a finding;
#   - interim reports: -i 0.1 (ten a second: each end samples every flow's counters, TCP_INFO and
#     the latency histograms of the period) against none;
#   - latency histograms and the clock: per transaction one histogram record and the clock reads,
#     timed alone (crates/netrig-metrics/examples/record_cost.rs) and set beside the measured
#     transaction rate, as a share of one CPU. They cannot be switched off: every transaction's
#     latency is recorded.
#   - the witness reads the kernel's counters at the window's two edges (and per interval with
#     -i), outside the data path: its cost is in the -i figure.
# A ratio within the rounds' spread is noise, not a cost.
#
#   bench/measuring-cost.sh [ROUNDS=5] [SECONDS=3]
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-3}
build
cargo build --release -q -p netrig-metrics --example record_cost
PORT=$(free_port)
background $NETRIG serve -p "$PORT" -q
sleep 1
for r in $(seq 1 "$ROUNDS"); do
  for kind in tcp-stream tcp-rr; do
    for v in $(rotated "$r" default no-cpu interval); do
      case $v in
        default) extra=() ;;
        no-cpu) extra=(--no-cpu) ;;
        interval) extra=(-i 0.1) ;;
      esac
      [ $kind = tcp-stream ] && extra+=(--cc cubic)
      $NETRIG $kind -H 127.0.0.1 -p "$PORT" -l "$SECS" "${extra[@]}" --json 2>/dev/null > "$OUT/$kind.$v.$r.json"
    done
  done
done
${CARGO_TARGET_DIR:-target}/release/examples/record_cost > "$OUT/record_cost.txt"
python3 - "$OUT" "$ROUNDS" "$SECS" <<'PY'
import json, statistics, sys
out, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cost = dict(l.split() for l in open(f"{out}/record_cost.txt"))
print(f"what measuring costs: 1 flow, loopback, {secs} s, {rounds} alternating rounds, medians")
for kind, key, unit, scale in (("tcp-stream", "throughput_bps", "Gbit/s", 1e9),
                               ("tcp-rr", "transactions_per_s", "tps", 1)):
    med = {}
    for v in ("default", "no-cpu", "interval"):
        xs = [json.load(open(f"{out}/{kind}.{v}.{r}.json"))["summary"][key] / scale
              for r in range(1, rounds + 1)]
        med[v] = statistics.median(xs)
        print(f"  {kind:<10} {v:<9} {med[v]:>12.2f} {unit}   runs {' '.join(f'{x:.2f}' for x in xs)}")
    print(f"  {kind:<10} CPU sampling: default/--no-cpu {med['default'] / med['no-cpu']:.3f}; "
          f"interim reports: -i 0.1/default {med['interval'] / med['default']:.3f}")
    # Paired by round (each round's runs side by side, the order rotating), which a drift over
    # the rounds sways less than the medians: the median ratio and how many rounds were above 1.
    def paired(a, b):
        rs = [json.load(open(f"{out}/{kind}.{a}.{r}.json"))["summary"][key]
              / json.load(open(f"{out}/{kind}.{b}.{r}.json"))["summary"][key]
              for r in range(1, rounds + 1)]
        return f"{statistics.median(rs):.3f} (above 1 in {sum(x > 1 for x in rs)} of {len(rs)})"
    print(f"  {kind:<10} paired by round: default/--no-cpu {paired('default', 'no-cpu')}; "
          f"-i 0.1/default {paired('interval', 'default')}")
    if kind == "tcp-rr":
        tps = med["default"]
        rec, clk = float(cost["record_ns"]), float(cost["clock_ns"])
        # Per transaction: one histogram record and two clock reads (its start and its end).
        share = tps * (rec + 2 * clk) / 1e9 * 100
        print(f"  {kind:<10} histogram record {rec:.1f} ns + 2 clock reads of {clk:.1f} ns per "
              f"transaction at {tps:.0f} tps: {share:.3f} % of one CPU")
PY
