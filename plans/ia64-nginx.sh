#!/bin/sh
# The IA64 plan's nginx (plans/ia64.toml): `start` runs nginx inside the lab
# host this runs in (an arm's in_host set-up), listening on PORT (default
# 8081) with 2 worker processes, serving 1 KiB at /bytes/1024 as netrig's
# HTTP server does, every path of its own (configuration, pid, logs, temp)
# in a directory named after the lab host's namespace; `stop` stops it and
# removes the directory. The machine's own nginx and its files are never
# touched. Needs nginx (Debian: nginx-light).
set -eu
ns=$(ip netns identify $$)
case "$ns" in nr*) ;; *) echo "ia64-nginx.sh: not in a lab host (namespace '$ns')" >&2; exit 2 ;; esac
d=/tmp/netrig-ia64-nginx-$ns
port=${2:-8081}
case "${1:-}" in
start)
  [ -x /usr/sbin/nginx ] || { echo "ia64-nginx.sh: nginx not installed (apt-get install nginx-light)" >&2; exit 2; }
  mkdir -p "$d/www/bytes" "$d/tmp"
  head -c 1024 /dev/zero | tr '\0' n > "$d/www/bytes/1024"
  cat > "$d/nginx.conf" <<CONF
daemon on; worker_processes 2; pid $d/nginx.pid; error_log $d/error.log;
events { worker_connections 16384; }
http { access_log off; client_body_temp_path $d/tmp; proxy_temp_path $d/tmp; fastcgi_temp_path $d/tmp;
  uwsgi_temp_path $d/tmp; scgi_temp_path $d/tmp; keepalive_requests 100000000; default_type application/octet-stream;
  server { listen $port reuseport backlog=4096; root $d/www; location / { } } }
CONF
  /usr/sbin/nginx -e "$d/error.log" -p "$d" -c "$d/nginx.conf"
  for _ in $(seq 50); do
    [ -n "$(ss -Hltn "sport = :$port")" ] && { echo "nginx $(cat "$d/nginx.pid") listens on port $port in $ns"; exit 0; }
    sleep 0.1
  done
  echo "ia64-nginx.sh: nginx did not listen on $port within 5 s: $(tail -3 "$d/error.log")" >&2; exit 1
  ;;
stop)
  if [ -f "$d/nginx.pid" ]; then
    pid=$(cat "$d/nginx.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$d"
  ;;
*) echo "usage: ia64-nginx.sh start|stop [PORT]" >&2; exit 2 ;;
esac
