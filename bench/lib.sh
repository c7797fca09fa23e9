# Shared set-up of the bench scripts; each sources it first:
#   . "$(dirname "$0")/lib.sh"
# It moves to the repository root and gives: NETRIG (the release binary, under
# $CARGO_TARGET_DIR when set, as cargo builds it),
# OUT (a scratch directory), need TOOL, free_port, build, rotated ROUND WORDS (the
# order of a round's runs), cpu_ticks, rounds_with_cpu ROUNDS TOOL... (the rounds of a
# comparison, each tool by the script's run_tool, with CPU ticks around it), background CMD
# (a server killed, with OUT removed, when the script exits) and
# iperf3_and_netrig (both servers, on IPORT and NPORT).
set -euo pipefail
cd "$(dirname "$0")/.."
NETRIG=${CARGO_TARGET_DIR:-target}/release/netrig
OUT=$(mktemp -d)
BG_PIDS=()
trap 'kill "${BG_PIDS[@]}" 2>/dev/null || true; rm -rf "$OUT"' EXIT

# Exits with status 2 when a peer tool (a Debian package of the same name) is missing.
need() { command -v "$1" >/dev/null || { echo "$1 not installed: apt-get install -y $1" >&2; exit 2; }; }

# A TCP port free on loopback now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

build() { cargo build --release -q; }

# Starts a server in the background, quiet; it is killed when the script exits.
background() { "$@" >/dev/null 2>&1 & BG_PIDS+=($!); }

# The words after ROUND, rotated by ROUND-1 places: the order in which round ROUND runs a
# comparison's tools, so that each goes first in turn and a drift over the rounds (a machine
# warming up, a load starting beside it) favours none.
#   for tool in $(rotated "$r" netrig iperf3 netperf); do ... done
rotated() {
  local r=$1; shift
  local n=$# i k
  for ((i = 0; i < n; i++)); do k=$(((i + r - 1) % n + 1)); printf '%s ' "${!k}"; done
}

# The machine's busy and total CPU time since boot, in ticks, from /proc/stat:
# busy = user + nice + system + irq + softirq + steal (as netrig counts it).
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }

# rounds_with_cpu ROUNDS TOOL...: ROUNDS rounds, each running every TOOL once in rotated order
# by the calling script's own `run_tool TOOL`, its stdout in $OUT/TOOL.ROUND.out and the
# machine's CPU ticks around it in $OUT/TOOL.ROUND.cpu ("busy0 total0 busy1 total1").
rounds_with_cpu() {
  local rounds=$1 r tool b0 t0 b1 t1; shift
  for r in $(seq 1 "$rounds"); do
    for tool in $(rotated "$r" "$@"); do
      read -r b0 t0 < <(cpu_ticks)
      run_tool "$tool" > "$OUT/$tool.$r.out" 2>/dev/null || true
      read -r b1 t1 < <(cpu_ticks)
      echo "$b0 $t0 $b1 $t1" > "$OUT/$tool.$r.cpu"
    done
  done
}

# Builds, then serves iperf3 on IPORT and netrig on NPORT (free loopback ports).
iperf3_and_netrig() {
  need iperf3
  build
  IPORT=$(free_port); NPORT=$(free_port)
  background iperf3 -s -p "$IPORT"
  background $NETRIG serve -p "$NPORT" -q
  sleep 1
}

# Connection-per-transaction runs leave tens of thousands of TIME_WAIT sockets
# for 60 s, and the next run's connect() pays for them (a longer search for a
# free local port), so a run's rate would depend on the run before it. Each
# such run goes in a network namespace of its own, made fresh (deleting one
# purges its TIME_WAIT): `fresh_ns` makes it (name in NS), `in_ns CMD` runs
# in it, `in_ns_background CMD` starts a server there (killed with the
# namespace), `drop_ns` deletes it. Needs root and iproute2.
NS=netrig-bench-$$
fresh_ns() {
  drop_ns
  ip netns add "$NS" && ip -n "$NS" link set lo up
  # An address beside loopback: getaddrinfo(AI_ADDRCONFIG), as netperf calls it, finds no
  # IPv4 at all with loopback alone. A veth pair with both ends inside: no traffic leaves.
  ip -n "$NS" link add nb0 type veth peer name nb1
  ip -n "$NS" addr add 10.253.0.1/24 dev nb0
  ip -n "$NS" link set nb0 up && ip -n "$NS" link set nb1 up
  # NS_PORTS="LOW HIGH": the namespace's ephemeral port range (net.ipv4.ip_local_port_range).
  if [ -n "${NS_PORTS:-}" ]; then ip netns exec "$NS" sysctl -q -w net.ipv4.ip_local_port_range="$NS_PORTS"; fi
}
in_ns() { ip netns exec "$NS" "$@"; }
in_ns_background() { ip netns exec "$NS" "$@" >/dev/null 2>&1 & NS_PIDS+=($!); }
NS_PIDS=()
drop_ns() {
  if [ ${#NS_PIDS[@]} -gt 0 ]; then kill "${NS_PIDS[@]}" 2>/dev/null || true; wait "${NS_PIDS[@]}" 2>/dev/null || true; fi
  NS_PIDS=()
  ip netns del "$NS" 2>/dev/null || true
}
trap 'drop_ns; kill "${BG_PIDS[@]}" 2>/dev/null || true; rm -rf "$OUT"' EXIT
