#!/usr/bin/env bash
# Open loop (constant rate, keep-alive, 1 KiB bodies) against nginx: netrig http --rate vs
# wrk2 -R (../shared/peers/wrk2) at each RATE, alternating: the achieved rate against the
# asked one (goal: within 1 % up to the highest rate wrk2 keeps) and the latency percentiles
# side by side (both timed from when each request was due).
#
#   bench/http-open-loop-vs-wrk2.sh [SECONDS=15] [THREADS=1] [CONNECTIONS=50] [RATES="1000 5000 10000 20000 40000"]
#
# wrk2 calibrates for its first 10 s: SECONDS must be more than 10 (its figures cover the
# rest); netrig is run for the same length with --omit 10, so both report the same span.
. "$(dirname "$0")/lib.sh"
. bench/nginx.sh
SECS=${1:-15}; T=${2:-1}; C=${3:-50}; RATES=${4:-"1000 5000 10000 20000 40000"}
WRK2=$(command -v wrk2 || echo ../shared/peers/wrk2)
[ -x "$WRK2" ] || { echo "wrk2 not found (PATH or ../shared/peers/wrk2)" >&2; exit 2; }
build
start_nginx "$(nproc)"
URL="http://127.0.0.1:$NGPORT/bytes/1024"
for rate in $RATES; do
  $NETRIG http --url "$URL" -t "$T" -c "$C" -d "$SECS" --omit 10 -R "$rate" --no-cpu --json 2>/dev/null > "$OUT/netrig.$rate.json"
  "$WRK2" -t"$T" -c"$C" -d"${SECS}s" -R"$rate" --latency "$URL" > "$OUT/wrk2.$rate.txt" 2>&1
done
python3 - "$OUT" "$SECS" "$T" "$C" $RATES <<'PY'
import json, re, sys
out, secs, t, c, rates = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def wrk2(rate):
    txt = open(f"{out}/wrk2.{rate}.txt").read()
    def ms(v, unit):
        return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]
    p = {}
    for q in ["50.000", "90.000", "99.000", "99.900"]:
        m = re.search(rf"^\s*{q}%\s+([0-9.]+)(us|ms|s|m)\b", txt, re.M)
        p[q] = ms(*m.groups()) if m else float("nan")
    rps = re.search(r"Requests/sec:\s*([0-9.]+)", txt)
    return (float(rps.group(1)) if rps else float("nan")), p
print(f"HTTP open loop, constant rate, keep-alive, 1 KiB, nginx, loopback: -t {t} -c {c}, {secs} s (first 10 s left out)")
print(f"{'asked/s':>8} | {'netrig sent/s':>13} {'%':>6} {'replies/s':>10} {'late':>6} | {'wrk2 req/s':>10} {'%':>6} | p50 ms netrig/wrk2 | p99 ms netrig/wrk2 | p99.9 ms netrig/wrk2")
for rate in rates:
    j = json.load(open(f"{out}/netrig.{rate}.json"))
    h, l, sc = j["summary"]["http"], j["summary"]["latency_us"] or {}, j["summary"]["schedule"] or {}
    wr, wp = wrk2(rate)
    a = float(rate)
    print(f"{rate:>8} | {h['requests_per_s']:13.1f} {h['requests_per_s']/a*100:6.2f} {h['replies_per_s']:10.1f} {sc.get('late', 0):6} | "
          f"{wr:10.1f} {wr/a*100:6.2f} | {l.get('p50', 0)/1e3:7.3f} / {wp['50.000']:7.3f} | {l.get('p99', 0)/1e3:7.3f} / {wp['99.000']:7.3f} | "
          f"{l.get('p999', 0)/1e3:7.3f} / {wp['99.900']:7.3f}")
PY
