#!/bin/sh
# The IA64 plan's overload arms (plans/ia64.toml; docs/studies/ia64-overload.md), run as an
# arm's set-up and tear-down with NETRIG (this netrig) and NETRIG_LAB (the lab's name):
#   flood-start        a SYN flood from lab host a1 at s1's HTTP port (8080): 20,000 SYNs/s for
#                      7 s, in the background (the run measures under it); its report to a file
#   flood-stop         wait for the flood to end (at most 15 s), print its report's summary line
#                      and the server's view, remove the file
#   half-close-start   (in s1: tcp_fin_timeout 8 s) 1,000 clients of c2 that read a reply and
#                      vanish, leaving s1's sockets in FIN_WAIT2; in the background, once opened
#   half-close-stop    wait until the generator's watch ends (the server closed them, at most
#                      30 s), print how long that took ("gone_after_s": ...), put the timeout back
# The generators refuse to run outside a lab (netrig_lab::overload::scope).
set -eu
: "${NETRIG:?the arm's commands get NETRIG}" "${NETRIG_LAB:?the arm's commands get NETRIG_LAB}"
dir=${TMPDIR:-/tmp}/netrig-ia64-overload-$NETRIG_LAB
mkdir -p "$dir"
wait_gone() { # PIDFILE SECONDS
  [ -f "$1" ] || return 0
  pid=$(cat "$1"); i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt $(( $2 * 5 )) ]; do sleep 0.2; i=$((i + 1)); done
  if kill -0 "$pid" 2>/dev/null; then kill "$pid"; echo "ia64-overload.sh: stopped pid $pid after $2 s" >&2; fi
  rm -f "$1"
}
case "${1:-}" in
flood-start)
  "$NETRIG" lab flood "$NETRIG_LAB" a1 --to s1:8080 --rate 20000 -l 7 > "$dir/flood.txt" 2>&1 &
  echo $! > "$dir/flood.pid"
  echo "SYN flood from a1 at s1:8080, 20000/s for 7 s (pid $!)" ;;
flood-stop)
  wait_gone "$dir/flood.pid" 15
  cat "$dir/flood.txt" 2>/dev/null || true
  rm -f "$dir/flood.txt" ;;
half-close-start)
  sysctl -qw net.ipv4.tcp_fin_timeout=8
  "$NETRIG" lab half-close "$NETRIG_LAB" c2 --to s1:8080 -n 1000 --watch 30 --json > "$dir/hc.json" 2> "$dir/hc.err" &
  echo $! > "$dir/hc.pid"
  # Until s1 holds 900 of them in FIN_WAIT2 (the clients gone), at most 10 s.
  i=0; n=0
  while [ "$n" -lt 900 ] && [ "$i" -lt 50 ]; do
    sleep 0.2; i=$((i + 1))
    n=$(ss -Htn state fin-wait-2 '( sport = :8080 )' | wc -l)
  done
  echo "half-closed connections from c2 to s1:8080: $n in FIN_WAIT2 in s1 (tcp_fin_timeout 8 s there)" ;;
half-close-stop)
  wait_gone "$dir/hc.pid" 30
  grep -o '"gone_after_s": *[0-9.null]*' "$dir/hc.json" || echo "half-close: no report ($(tail -c 300 "$dir/hc.err" 2>/dev/null))"
  grep -o '"left_at_end": *[0-9]*' "$dir/hc.json" || true
  rm -f "$dir/hc.json" "$dir/hc.err"
  sysctl -qw net.ipv4.tcp_fin_timeout=60 ;;
*) echo "usage: ia64-overload.sh flood-start|flood-stop|half-close-start|half-close-stop" >&2; exit 2 ;;
esac
