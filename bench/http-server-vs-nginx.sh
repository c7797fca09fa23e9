#!/usr/bin/env bash
# Side-by-side HTTP server speed: netrig http-serve (/bytes/1024) against Debian's nginx
# (a 1 KiB file), both with the same number of worker threads (nginx: worker processes),
# driven by the same wrk (closed loop, keep-alive, same threads and connections), alternating
# rounds (the order flips each round), medians and their ratio.
#
#   bench/http-server-vs-nginx.sh [ROUNDS=5] [SECONDS=5] [WORKERS="1 2"] [WRK_THREADS=1] [CONNS=50]
#   OLD=path/to/netrig bench/http-server-vs-nginx.sh ...   # also that build's http-serve, in
#                                                         # the same rounds (the three in
#                                                         # rotated order): the ratio new/old
#
# nginx runs as tuned for the case: access_log off, sendfile and tcp_nopush on, an open-file
# cache, and keepalive_requests 1000000 (its default of 1000 would make wrk reconnect, which
# netrig, uncapped by default, never asks). Each server's response head is printed too: nginx
# sends more header bytes (Last-Modified, ETag, Accept-Ranges, Connection).
#
# Needs: nginx (apt-get install -y nginx-light), wrk (../shared/peers/wrk, or WRK=path), a
# release build.
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
SECS=${2:-5}
WORKERS=${3:-"1 2"}
WRK_THREADS=${4:-1}
CONNS=${5:-50}
OLD=${OLD:-}
WRK=${WRK:-$(command -v wrk || echo ../shared/peers/wrk)}
[ -x "$WRK" ] || WRK=/work/shared/peers/wrk
[ -x "$WRK" ] || { echo "wrk not found: set WRK=path (../shared/peers/wrk)" >&2; exit 2; }
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$NGINX" ] || { echo "nginx not installed: apt-get install -y nginx-light" >&2; exit 2; }
build

mkdir -p "$OUT/www" "$OUT/logs"
# nginx's workers run as www-data when started by root: let them read the file.
chmod 755 "$OUT" "$OUT/www"
head -c 1024 /dev/zero | tr '\0' 'a' > "$OUT/www/1k"

run_nginx() { # WORKERS PORT -> pid file in OUT
  cat > "$OUT/nginx.conf" <<EOF
worker_processes $1;
daemon off;
pid $OUT/nginx.pid;
error_log $OUT/logs/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 60;
  keepalive_requests 1000000;
  open_file_cache max=64 inactive=60s;
  client_body_temp_path $OUT/tmp; proxy_temp_path $OUT/tmp; fastcgi_temp_path $OUT/tmp;
  uwsgi_temp_path $OUT/tmp; scgi_temp_path $OUT/tmp;
  default_type application/octet-stream;
  server { listen 127.0.0.1:$2 reuseport; root $OUT/www; }
}
EOF
  mkdir -p "$OUT/tmp"
  "$NGINX" -c "$OUT/nginx.conf" -p "$OUT" >"$OUT/logs/nginx.out" 2>&1 &
  BG_PIDS+=($!)
}

wait_port() { for _ in $(seq 100); do python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null && return; sleep 0.05; done; echo "port $1 did not open" >&2; for f in "$OUT"/logs/*; do echo "$f:"; tail -n 5 "$f"; done >&2; exit 1; }

one() { # NAME URL ROUND WORKERS
  "$WRK" -t"$WRK_THREADS" -c"$CONNS" -d"${SECS}s" --latency "$2" > "$OUT/$1.$4.$3.txt" 2>&1 || true
}

for w in $WORKERS; do
  GPORT=$(free_port); NPORT=$(free_port)
  run_nginx "$w" "$GPORT"; GPID=${BG_PIDS[-1]}
  $NETRIG http-serve --bind 127.0.0.1 -p "$NPORT" --threads "$w" >"$OUT/logs/netrig.$w.out" 2>&1 &
  BG_PIDS+=($!); NPID=$!
  wait_port "$GPORT"; wait_port "$NPORT"
  if [ -n "$OLD" ]; then
    OPORT=$(free_port)
    "$OLD" http-serve --bind 127.0.0.1 -p "$OPORT" --threads "$w" >"$OUT/logs/old.$w.out" 2>&1 &
    BG_PIDS+=($!); OPID=$!
    wait_port "$OPORT"
  fi
  curl -s -D - -o /dev/null "http://127.0.0.1:$GPORT/1k" > "$OUT/head.nginx" || true
  curl -s -D - -o /dev/null "http://127.0.0.1:$NPORT/bytes/1024" > "$OUT/head.netrig" || true
  for r in $(seq 1 "$ROUNDS"); do
    if [ -n "$OLD" ]; then
      for s in $(rotated "$r" nginx netrig old); do
        case $s in
          nginx) one nginx "http://127.0.0.1:$GPORT/1k" "$r" "$w" ;;
          netrig) one netrig "http://127.0.0.1:$NPORT/bytes/1024" "$r" "$w" ;;
          old) one old "http://127.0.0.1:$OPORT/bytes/1024" "$r" "$w" ;;
        esac
      done
    elif [ $((r % 2)) = 1 ]; then
      one nginx "http://127.0.0.1:$GPORT/1k" "$r" "$w"; one netrig "http://127.0.0.1:$NPORT/bytes/1024" "$r" "$w"
    else
      one netrig "http://127.0.0.1:$NPORT/bytes/1024" "$r" "$w"; one nginx "http://127.0.0.1:$GPORT/1k" "$r" "$w"
    fi
  done
  # The server's own count beside wrk's.
  curl -s "http://127.0.0.1:$NPORT/.netrig/stats" > "$OUT/netrig.$w.stats.json" || true
  kill "$NPID" "$GPID" 2>/dev/null || true; wait "$NPID" "$GPID" 2>/dev/null || true
  if [ -n "$OLD" ]; then kill "$OPID" 2>/dev/null || true; wait "$OPID" 2>/dev/null || true; fi
done

echo "== response heads (1 KiB body each)"
for s in nginx netrig; do echo "-- $s: $(wc -c < "$OUT/head.$s") bytes of head"; grep -v '^Date' "$OUT/head.$s" | tr -d '\r'; done
python3 - "$OUT" "$ROUNDS" "$SECS" "$WORKERS" "$WRK_THREADS" "$CONNS" <<'PY'
import json, re, statistics, sys
out, rounds, secs, workers, wt, conns = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5], sys.argv[6]
def rps(name, w, r):
    t = open(f"{out}/{name}.{w}.{r}.txt").read()
    m = re.search(r"^Requests/sec:\s*([0-9.]+)", t, re.M)
    if not m:
        print(f"-- {name} workers={w} round {r}: no Requests/sec in wrk's output:\n{t}")
        return None
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", t)
    if bad:
        print(f"-- {name} workers={w} round {r}: {bad.group(0)}")
    return float(m.group(1))
def p99(name, w, r):
    m = re.search(r"^\s+99%\s+(\S+)", open(f"{out}/{name}.{w}.{r}.txt").read(), re.M)
    return m.group(1) if m else "?"
print(f"\n== wrk -t{wt} -c{conns} -d{secs}s, keep-alive, 1 KiB bodies, loopback, {rounds} alternating rounds per row")
print("requests/s = wrk's count of responses over its run; medians of the rounds")
print(f"{'workers':>7} | {'nginx median':>12} | {'netrig median':>13} | {'ratio':>5} | nginx rounds / netrig rounds")
for w in workers:
    g = [rps("nginx", w, r) for r in range(1, rounds + 1)]
    n = [rps("netrig", w, r) for r in range(1, rounds + 1)]
    g = [x for x in g if x is not None]; n = [x for x in n if x is not None]
    if not g or not n:
        print(f"{w:>7} | withheld: a server gave no figure (see above)")
        continue
    mg, mn = statistics.median(g), statistics.median(n)
    print(f"{w:>7} | {mg:12.0f} | {mn:13.0f} | {mn/mg:5.2f} | {' '.join(f'{x:.0f}' for x in g)} / {' '.join(f'{x:.0f}' for x in n)}")
    import os
    if os.path.exists(f"{out}/old.{w}.1.txt"):
        o = [x for x in (rps("old", w, r) for r in range(1, rounds + 1)) if x is not None]
        if o:
            print(f"{'':>7}   old build: median {statistics.median(o):.0f} ({' '.join(f'{x:.0f}' for x in o)}); "
                  f"ratio new/old {mn / statistics.median(o):.3f}")
    try:
        st = json.load(open(f"{out}/netrig.{w}.stats.json"))
        print(f"{'':>7}   netrig's own count over all its rounds: {st['requests']} requests, responses {st['responses']}, "
              f"{st['connections_accepted']} connections")
    except Exception as e:
        print(f"{'':>7}   netrig's own count withheld: {e}")
PY
