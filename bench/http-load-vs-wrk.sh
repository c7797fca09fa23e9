#!/usr/bin/env bash
# Closed loop, keep-alive, 1 KiB bodies: netrig http vs wrk (../shared/peers/wrk) against
# Debian's nginx with one worker per core, the same threads (-t) and connections (-c),
# alternating rounds, medians and their ratio (goal: netrig >= 1.0x wrk).
#
#   bench/http-load-vs-wrk.sh [ROUNDS=5] [SECONDS=5] [THREADS=1] [CONNECTIONS=50]
#   OLD=path/to/netrig bench/http-load-vs-wrk.sh ...   # also that build, in the same rounds
#                                                     # (its order against this one's flips
#                                                     # each round): the ratio new/old too
#
# Needs: nginx-light, wrk on PATH or in ../shared/peers, a release build. On one machine the
# generator and nginx share the CPUs: both tools are measured under the same sharing.
. "$(dirname "$0")/lib.sh"
. bench/nginx.sh
ROUNDS=${1:-5}; SECS=${2:-5}; T=${3:-1}; C=${4:-50}
WRK=${WRK:-$(command -v wrk || echo ../shared/peers/wrk)}
[ -x "$WRK" ] || WRK=/work/shared/peers/wrk
OLD=${OLD:-}
[ -x "$WRK" ] || { echo "wrk not found (PATH or ../shared/peers/wrk)" >&2; exit 2; }
build
start_nginx "$(nproc)"
URL="http://127.0.0.1:$NGPORT/bytes/1024"
for r in $(seq 1 "$ROUNDS"); do
  for b in $(if [ -n "$OLD" ]; then rotated "$r" netrig old; else echo netrig; fi); do
    bin=$NETRIG; [ "$b" = old ] && bin=$OLD
    "$bin" http --url "$URL" -t "$T" -c "$C" -d "$SECS" --no-cpu --json 2>/dev/null > "$OUT/$b.$r.json"
  done
  "$WRK" -t"$T" -c"$C" -d"${SECS}s" "$URL" > "$OUT/wrk.$r.txt" 2>&1
done
python3 - "$OUT" "$ROUNDS" "$SECS" "$T" "$C" "$(nproc)" <<'PY'
import json, re, statistics, sys
out, rounds, secs, t, c, cpus = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
n, w, errs = [], [], 0
for r in range(1, rounds + 1):
    h = json.load(open(f"{out}/netrig.{r}.json"))["summary"]["http"]
    n.append(h["replies_per_s"]); errs += h["errors"]["total"]
    txt = open(f"{out}/wrk.{r}.txt").read()
    w.append(float(re.search(r"Requests/sec:\s*([0-9.]+)", txt).group(1)))
print(f"HTTP closed loop, keep-alive, 1 KiB body, nginx with {cpus} worker(s), loopback: -t {t} -c {c}, {secs} s, {rounds} alternating rounds")
print(f"  (netrig: replies/s over its window; wrk: Requests/sec, its responses over its run)")
for name, v in [("netrig http", n), ("wrk", w)]:
    print(f"{name:12} median {statistics.median(v):10.0f} /s   spread {min(v):.0f}..{max(v):.0f}")
print(f"ratio netrig/wrk: {statistics.median(n) / statistics.median(w):.3f}   (netrig errors: {errs})")
try:
    o = [json.load(open(f"{out}/old.{r}.json"))["summary"]["http"]["replies_per_s"] for r in range(1, rounds + 1)]
except FileNotFoundError:
    o = []
if o:
    print(f"{'old netrig':12} median {statistics.median(o):10.0f} /s   spread {min(o):.0f}..{max(o):.0f}")
    print(f"ratio new/old: {statistics.median(n) / statistics.median(o):.3f}   "
          f"(paired by round: {statistics.median([a / b for a, b in zip(n, o)]):.3f})")
PY
