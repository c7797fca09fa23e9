#!/usr/bin/env bash
# The IA64 Linux study's web experiment on loopback: httperf-style arrivals, a new connection for
# each request, at 100 to 2,000 requests/s in steps of 100 (by default), from one client and then
# from two client processes (127.0.0.1 and 127.0.0.2), against netrig's HTTP server and Debian's
# nginx, each with a netrig agent watching the server's host (--server-agent). Prints, per server
# and client count, reply rate against request rate, errors, p99, the server host's CPU,
# ListenOverflows and peak TIME_WAIT, and the saturation point; writes the rate plots.
#
#   bench/http-rate-sweep.sh [SECONDS=2] [RATES=100..2000:100] [PLOTDIR=target/http-rate-sweep]
#
# Needs: nginx-light, python3, a release build. Not a test: a measurement (the study ran 60 s
# per rate; SECONDS trades that for time).
. "$(dirname "$0")/lib.sh"
. bench/nginx.sh
SECS=${1:-2}
RATES=${2:-100..2000:100}
PLOTS=${3:-target/http-rate-sweep}
build
start_nginx "$(nproc)"
HPORT=$(free_port); APORT=$(free_port)
background $NETRIG http-serve --bind 127.0.0.1 -p "$HPORT"
background $NETRIG serve --bind 127.0.0.1 -p "$APORT" -q
sleep 1
mkdir -p "$PLOTS"
for server in netrig nginx; do
  port=$HPORT; [ $server = nginx ] && port=$NGPORT
  for clients in 1 2; do
    extra=(); [ $clients -gt 1 ] && extra=(--clients "$clients")
    $NETRIG http -H 127.0.0.1 -p "$port" --path /bytes/1024 --new-conn -c 1000 -d "$SECS" \
      --rate "$RATES" "${extra[@]}" --server-agent "127.0.0.1:$APORT" \
      --plot "$PLOTS/$server-$clients" --json > "$OUT/$server-$clients.json" 2>"$OUT/$server-$clients.err" \
      || { echo "$server, $clients client(s): $(tail -n 2 "$OUT/$server-$clients.err")"; continue; }
  done
done
python3 - "$OUT" "$SECS" "$RATES" "$PLOTS" <<'PY'
import json, os, sys
out, secs, rates, plots = sys.argv[1:]
for server in ("netrig", "nginx"):
    for clients in (1, 2):
        f = f"{out}/{server}-{clients}.json"
        if not os.path.exists(f) or os.path.getsize(f) == 0:
            continue
        d = json.load(open(f))
        t = d["tests"][0]
        print(f"\n{server}'s HTTP server, {clients} client process(es), a new connection per request, 1 KiB bodies, {secs} s per rate ({rates}/s)")
        print(f"{'asked/s':>8} {'offered/s':>9} {'replies/s':>9} {'errors':>7} {'p99 ms':>8} {'server CPU %':>12} {'us/reply':>8} {'ListenOvf':>9} {'TIME_WAIT':>9}")
        for p in t["points"]:
            r = p["arms"][0]["runs"][0]
            s, h = r["summary"], r["summary"].get("http") or {}
            sh = r.get("server_host") or {}
            sched = s.get("schedule") or {}
            offered = sched.get("due", 0) / s["elapsed_s"] if s["elapsed_s"] else 0
            lat = s.get("latency_us") or {}
            cpu = (sh.get("cpu") or {}).get("busy_pct")
            sd = sh.get("service_demand_us_per_transaction")
            ovf = (sh.get("counters") or {}).get("TcpExt.ListenOverflows", 0)
            tw = ((sh.get("sockets") or {}).get("time_wait") or {}).get("peak")
            fmt = lambda v, p=1: "-" if v is None else f"{v:.{p}f}"
            print(f"{p['point']['values'][0][1]:>8} {offered:>9.0f} {h.get('replies_per_s', 0):>9.0f} {h.get('errors', {}).get('total', 0):>7} "
                  f"{fmt(lat.get('p99') and lat['p99'] / 1e3, 2):>8} {fmt(cpu):>12} {fmt(sd):>8} {ovf:>9} {tw if tw is not None else '-':>9}")
        sat = t.get("saturation") or []
        print("saturation: " + ("; ".join(f"at {s['values'][0][1]}/s ({s['reason']}); highest kept {s['highest_kept_per_s'] or 0:.0f}/s" for s in sat) if sat else "none in this range"))
        print(f"plot: {plots}/{server}-{clients}/rate.svg")
PY
