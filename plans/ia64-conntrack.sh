#!/bin/sh
# The IA64 plan's connection tracking (plans/ia64.toml), inside the lab host
# this runs in (an arm's in_host set-up and tear-down); the lab builds that
# host with every packet exempt (`conntrack = false`: its table
# netrig_notrack).
#   on [TIME_WAIT_S]          track every packet (table netrig_ia64_ct);
#                             conntrack's TIME_WAIT timeout for TCP set to
#                             TIME_WAIT_S (default: the kernel's, 120)
#   full FREE [TIME_WAIT_S]   as on, and the table filled with idle
#                             established entries until FREE are left
#                             (`netrig lab ct-fill`): nf_conntrack_max is
#                             host-wide on this kernel, so a small table is
#                             made by filling the big one
#   off                       back to the lab's own: the table flushed, the
#                             timeout put back, every packet exempt again
# Nothing outside the lab host is changed (each is per network namespace).
set -eu
ns=$(ip netns identify $$)
case "$ns" in nr*) ;; *) echo "ia64-conntrack.sh: not in a lab host (namespace '$ns')" >&2; exit 2 ;; esac
tw=net.netfilter.nf_conntrack_tcp_timeout_time_wait
track() {
  nft delete table inet netrig_notrack 2>/dev/null || true
  printf 'table inet netrig_ia64_ct {\n chain pre { type filter hook prerouting priority 0; ct state new counter; }\n chain out { type filter hook output priority 0; ct state new counter; }\n}\n' | nft -f -
  [ -n "${1:-}" ] && sysctl -qw "$tw=$1"
  echo "conntrack on in lab ${NETRIG_LAB:-?}, namespace $ns: TIME_WAIT held $(sysctl -n $tw) s"
}
case "${1:-}" in
on) track "${2:-}" ;;
full)
  track "${3:-}"
  "${NETRIG:-netrig}" lab ct-fill --leave "${2:?FREE}"
  ;;
off)
  nft list table inet netrig_ia64_ct 2>/dev/null | grep counter || true
  nft delete table inet netrig_ia64_ct 2>/dev/null || true
  "${NETRIG:-netrig}" lab ct-fill --flush
  sysctl -qw "$tw=120"
  printf 'table inet netrig_notrack {\n chain pre { type filter hook prerouting priority -300; notrack; }\n chain out { type filter hook output priority -300; notrack; }\n}\n' | nft -f -
  echo "conntrack off in lab ${NETRIG_LAB:-?}, namespace $ns"
  ;;
*) echo "usage: ia64-conntrack.sh on [TIME_WAIT_S] | full FREE [TIME_WAIT_S] | off" >&2; exit 2 ;;
esac
