# Starts Debian's nginx (nginx-light) on a free loopback port NGPORT with
# WORKERS worker processes, serving 1 KiB at /bytes/1024; killed when the
# script exits. Sourced by the HTTP bench scripts after lib.sh.
start_nginx() {
  local workers=$1
  [ -x /usr/sbin/nginx ] || { echo "nginx not installed: apt-get install -y nginx-light" >&2; exit 2; }
  NGPORT=$(free_port)
  local d="$OUT/nginx"
  mkdir -p "$d/www/bytes" "$d/tmp"
  head -c 1024 /dev/zero | tr '\0' n > "$d/www/bytes/1024"
  cat > "$d/nginx.conf" <<CONF
daemon off; worker_processes $workers; pid $d/nginx.pid; error_log $d/error.log;
events { worker_connections 16384; }
http { access_log off; client_body_temp_path $d/tmp; proxy_temp_path $d/tmp; fastcgi_temp_path $d/tmp;
  uwsgi_temp_path $d/tmp; scgi_temp_path $d/tmp; keepalive_requests 100000000; default_type application/octet-stream;
  server { listen 127.0.0.1:$NGPORT backlog=4096; root $d/www; location / { } } }
CONF
  background /usr/sbin/nginx -c "$d/nginx.conf" -p "$d"
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$NGPORT) 2>/dev/null && return; sleep 0.1; done
  echo "nginx did not start: $(cat "$d/error.log")" >&2; exit 1
}
