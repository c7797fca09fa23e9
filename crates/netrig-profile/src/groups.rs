//! Which subsystem a sample's time went to, from the names in its stack, and whether it ran
//! in softirq context.
//!
//! Each group has a list of patterns on kernel function names (a prefix, or the whole name)
//! and on module names. A stack is read from its deepest frame (the leaf, where the CPU was)
//! towards the root, and the first frame that matches a group decides: the deepest specific
//! frame wins, so a copy inside tcp_sendmsg counts as memory copy, and a lock or an entry
//! stub that matches nothing passes the decision to its caller. Where one name would match
//! two groups, the group listed first in [`TABLE`] takes it (conntrack before netfilter,
//! netfilter before IP: `ipv4_conntrack_in` is conntrack, `ipt_do_table` netfilter).
//!
//! The lists are this crate's judgement from the kernel's naming (6.x); a function that
//! matches none of them leaves its sample to its callers, and a stack that matches nothing
//! is "other".

/// A subsystem of the kernel (or idle, or neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    Socket,
    Tcp,
    Udp,
    Ip,
    Netfilter,
    Conntrack,
    Qdisc,
    Device,
    MemoryCopy,
    Scheduler,
    Idle,
    Other,
}

impl Group {
    /// Every group, in the order reports list them.
    pub const ALL: [Group; 12] = [
        Group::Socket,
        Group::Tcp,
        Group::Udp,
        Group::Ip,
        Group::Netfilter,
        Group::Conntrack,
        Group::Qdisc,
        Group::Device,
        Group::MemoryCopy,
        Group::Scheduler,
        Group::Idle,
        Group::Other,
    ];

    /// Its name in results.
    pub fn name(self) -> &'static str {
        match self {
            Group::Socket => "socket",
            Group::Tcp => "tcp",
            Group::Udp => "udp",
            Group::Ip => "ip",
            Group::Netfilter => "netfilter",
            Group::Conntrack => "conntrack",
            Group::Qdisc => "qdisc",
            Group::Device => "device",
            Group::MemoryCopy => "memory-copy",
            Group::Scheduler => "scheduler",
            Group::Idle => "idle",
            Group::Other => "other",
        }
    }
}

/// A pattern on a frame.
#[derive(Debug, Clone, Copy)]
pub enum Pat {
    /// The function's name starts with this.
    Prefix(&'static str),
    /// The function's name is this.
    Exact(&'static str),
    /// The function is in this kernel module (`fn [module]` in kallsyms).
    Module(&'static str),
}

use Pat::{Exact, Module, Prefix};

/// The groups' patterns, first match wins within one frame.
pub const TABLE: &[(Group, &[Pat])] = &[
    (
        Group::Conntrack,
        &[
            Prefix("nf_conntrack"),
            Prefix("__nf_conntrack"),
            Prefix("nf_ct_"),
            Prefix("__nf_ct_"),
            Prefix("ipv4_conntrack"),
            Prefix("ipv6_conntrack"),
            Prefix("nf_nat_"),
            Prefix("__nf_nat"),
            Module("nf_conntrack"),
            Module("nf_nat"),
        ],
    ),
    (
        Group::Netfilter,
        &[
            Prefix("nf_"),
            Prefix("__nf_"),
            Prefix("nft_"),
            Prefix("__nft_"),
            Prefix("nf_hook"),
            Prefix("ipt_"),
            Prefix("ip6t_"),
            Prefix("ebt_"),
            Prefix("arpt_"),
            Prefix("xt_"),
            Prefix("nfnetlink"),
            Module("nf_tables"),
            Module("x_tables"),
            Module("ip_tables"),
            Module("ip6_tables"),
            Module("iptable_filter"),
            Module("nft_chain_nat"),
        ],
    ),
    (
        Group::Qdisc,
        &[
            Prefix("qdisc_"),
            Prefix("__qdisc_"),
            Prefix("dev_qdisc"),
            Prefix("sch_"),
            Prefix("__dev_xmit_skb"),
            Prefix("pfifo_"),
            Prefix("fq_"),
            Prefix("htb_"),
            Prefix("tbf_"),
            Prefix("netem_"),
            Prefix("cake_"),
            Prefix("prio_"),
            Prefix("tcf_"),
            Prefix("tc_"),
            Prefix("cls_"),
            Prefix("mq_"),
            Module("sch_htb"),
            Module("sch_netem"),
            Module("sch_tbf"),
            Module("sch_fq"),
            Module("sch_fq_codel"),
            Module("sch_cake"),
            Module("sch_prio"),
            Module("cls_u32"),
            Module("cls_flower"),
            Module("act_police"),
        ],
    ),
    (
        Group::MemoryCopy,
        &[
            Prefix("copy_user"),
            Prefix("copy_page"),
            Prefix("_copy_to_"),
            Prefix("_copy_from_"),
            Prefix("copy_to_"),
            Prefix("copy_from_"),
            Prefix("__copy_"),
            Prefix("rep_movs"),
            Prefix("memcpy"),
            Prefix("__memcpy"),
            Prefix("memmove"),
            Prefix("__memmove"),
            Prefix("memset"),
            Prefix("__memset"),
            Prefix("clear_page"),
            Prefix("skb_copy"),
            Prefix("csum_partial_copy"),
            Exact("simple_copy_to_iter"),
            Exact("__skb_datagram_iter"),
        ],
    ),
    (
        Group::Tcp,
        &[
            Prefix("tcp"),
            Prefix("__tcp"),
            Prefix("do_tcp"),
            Prefix("inet_csk"),
            Prefix("__inet_csk"),
            Prefix("inet_twsk"),
            Prefix("__inet_twsk"),
            Prefix("inet_hash"),
            Prefix("__inet_hash"),
            Prefix("inet_ehash"),
            Prefix("__inet_lookup"),
            Prefix("inet_bind_"),
            Prefix("__inet_bind"),
            Prefix("inet_sk_rebuild"),
            Prefix("bictcp"),
            Prefix("cubictcp"),
            Prefix("bbr_"),
            Prefix("sk_stream_"),
        ],
    ),
    (
        Group::Udp,
        &[
            Prefix("udp"),
            Prefix("__udp"),
            Prefix("__skb_recv_udp"),
            Prefix("skb_consume_udp"),
            Prefix("__skb_wait_for_more"),
            Prefix("ip_make_skb"),
            Prefix("ip_append_data"),
        ],
    ),
    (
        Group::Socket,
        &[
            Prefix("sock_"),
            Prefix("__sock_"),
            Prefix("sk_"),
            Prefix("__sk_"),
            Prefix("sock"),
            Prefix("__sys_send"),
            Prefix("__sys_recv"),
            Prefix("__sys_connect"),
            Prefix("__sys_accept"),
            Prefix("__sys_socket"),
            Prefix("__sys_bind"),
            Prefix("__sys_listen"),
            Prefix("__sys_shutdown"),
            Prefix("__x64_sys_send"),
            Prefix("__x64_sys_recv"),
            Prefix("__x64_sys_connect"),
            Prefix("__x64_sys_accept"),
            Prefix("__x64_sys_socket"),
            Prefix("__x64_sys_shutdown"),
            Prefix("__arm64_sys_send"),
            Prefix("__arm64_sys_recv"),
            Exact("inet_sendmsg"),
            Exact("inet_recvmsg"),
            Exact("inet_accept"),
            Prefix("inet_stream_connect"),
            Prefix("__inet_stream_connect"),
            Exact("inet_release"),
            Exact("inet_create"),
            Exact("inet_shutdown"),
            Exact("lock_sock_nested"),
            Exact("release_sock"),
            Prefix("skb_"),
            Prefix("__skb_"),
            Prefix("alloc_skb"),
            Prefix("__alloc_skb"),
            Prefix("kfree_skb"),
            Prefix("__kfree_skb"),
            Prefix("consume_skb"),
            Prefix("napi_consume_skb"),
            Prefix("__netdev_alloc_skb"),
            Prefix("sys_recvfrom"),
            Prefix("sys_sendto"),
        ],
    ),
    (
        Group::Ip,
        &[
            Prefix("ip_"),
            Prefix("__ip_"),
            Prefix("ip6_"),
            Prefix("__ip6_"),
            Prefix("ipv4_"),
            Prefix("ipv6_"),
            Prefix("inet_"),
            Prefix("__inet_"),
            Prefix("inet6_"),
            Prefix("fib_"),
            Prefix("fib4_"),
            Prefix("fib6_"),
            Prefix("__fib"),
            Prefix("rt6_"),
            Prefix("__mkroute"),
            Prefix("ip4_"),
            Prefix("dst_"),
            Prefix("icmp"),
            Prefix("neigh_"),
            Prefix("__neigh_"),
            Prefix("raw_v4"),
            Prefix("ipt_"),
            Prefix("rt_"),
        ],
    ),
    (
        Group::Device,
        &[
            Prefix("loopback_"),
            Prefix("veth_"),
            Prefix("dev_hard_start_xmit"),
            Prefix("dev_queue_xmit"),
            Prefix("__dev_queue_xmit"),
            Prefix("netif_"),
            Prefix("__netif_"),
            Prefix("napi_"),
            Prefix("__napi_"),
            Exact("net_rx_action"),
            Exact("net_tx_action"),
            Exact("process_backlog"),
            Prefix("gro_"),
            Prefix("dev_gro"),
            Prefix("napi_gro"),
            Prefix("validate_xmit"),
            Prefix("virtnet_"),
            Prefix("virtqueue_"),
            Prefix("vring_"),
            Prefix("e1000"),
            Prefix("igb_"),
            Prefix("ixgbe_"),
            Prefix("i40e_"),
            Prefix("ice_"),
            Prefix("mlx5"),
            Prefix("bnxt_"),
            Prefix("ena_"),
            Prefix("gve_"),
            Module("veth"),
            Module("virtio_net"),
            Module("e1000e"),
            Module("igb"),
            Module("ixgbe"),
            Module("i40e"),
            Module("ice"),
            Module("mlx5_core"),
            Module("bnxt_en"),
            Module("ena"),
        ],
    ),
    (
        Group::Scheduler,
        &[
            Exact("schedule"),
            Prefix("__schedule"),
            Prefix("schedule_"),
            Prefix("pick_next_"),
            Prefix("__pick_next"),
            Prefix("enqueue_"),
            Prefix("dequeue_"),
            Prefix("try_to_wake_up"),
            Prefix("wake_up_"),
            Prefix("__wake_up"),
            Prefix("finish_task_switch"),
            Prefix("update_curr"),
            Prefix("update_load_avg"),
            Prefix("ttwu_"),
            Prefix("sched_"),
            Prefix("__switch_to"),
            Prefix("switch_mm"),
            Prefix("psi_"),
            Prefix("select_task_rq"),
            Prefix("check_preempt"),
            Prefix("resched_"),
            Prefix("load_balance"),
            Prefix("newidle_balance"),
            Prefix("sched_balance"),
            Prefix("rebalance_domains"),
            Prefix("set_next_entity"),
            Prefix("put_prev_"),
            Prefix("update_rq_clock"),
            Prefix("context_switch"),
            Prefix("prepare_task_switch"),
            Prefix("activate_task"),
        ],
    ),
    (
        Group::Idle,
        &[
            Prefix("do_idle"),
            Prefix("cpu_idle"),
            Prefix("cpuidle_"),
            Prefix("default_idle"),
            Prefix("arch_cpu_idle"),
            Prefix("intel_idle"),
            Prefix("acpi_idle"),
            Prefix("poll_idle"),
            Prefix("native_safe_halt"),
            Prefix("pv_native_safe_halt"),
            Prefix("safe_halt"),
            Prefix("mwait_idle"),
            Prefix("cpu_startup_entry"),
            Prefix("haltpoll"),
            Prefix("acpi_processor_ffh_cstate_enter"),
            Prefix("amd_e400_idle"),
        ],
    ),
];

/// The frames that put a stack in softirq context: the softirq entry points and the network
/// softirqs' own handlers.
pub const SOFTIRQ_FRAMES: &[&str] = &[
    "__do_softirq",
    "handle_softirqs",
    "do_softirq",
    "do_softirq_own_stack",
    "__softirqentry_text_start",
    "run_ksoftirqd",
    "net_rx_action",
    "net_tx_action",
];

/// A frame's function name and module, from `fn` or `fn [module]`.
fn split_frame(frame: &str) -> (&str, Option<&str>) {
    match frame.split_once(" [") {
        Some((name, rest)) => (name, rest.strip_suffix(']')),
        None => (frame, None),
    }
}

/// The group of one frame, if any pattern names it.
pub fn frame_group(frame: &str) -> Option<Group> {
    let (name, module) = split_frame(frame);
    TABLE.iter().find_map(|(group, pats)| {
        pats.iter()
            .any(|p| match *p {
                Prefix(s) => name.starts_with(s),
                Exact(s) => name == s,
                Module(m) => module == Some(m),
            })
            .then_some(*group)
    })
}

/// The group of a stack given root first: its deepest frame that matches a group.
pub fn classify<S: AsRef<str>>(root_first: &[S]) -> Group {
    root_first
        .iter()
        .rev()
        .find_map(|f| frame_group(f.as_ref()))
        .unwrap_or(Group::Other)
}

/// True where the stack ran in softirq context.
pub fn is_softirq<S: AsRef<str>>(frames: &[S]) -> bool {
    frames
        .iter()
        .any(|f| SOFTIRQ_FRAMES.contains(&split_frame(f.as_ref()).0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(s: &str) -> Vec<&str> {
        s.split(';').collect()
    }

    #[test]
    fn real_kernel_stacks_are_classified_by_their_deepest_specific_frame() {
        let cases = [
            // A TCP send on loopback: the copy from user space is memory copy.
            (
                "entry_SYSCALL_64;do_syscall_64;__x64_sys_sendto;__sys_sendto;tcp_sendmsg;\
              tcp_sendmsg_locked;_copy_from_iter;copy_user_enhanced_fast_string",
                Group::MemoryCopy,
            ),
            (
                "entry_SYSCALL_64;do_syscall_64;__x64_sys_sendto;__sys_sendto;tcp_sendmsg;\
              tcp_sendmsg_locked;tcp_push;__tcp_transmit_skb",
                Group::Tcp,
            ),
            // A lock matches nothing: its caller decides.
            (
                "entry_SYSCALL_64;do_syscall_64;__x64_sys_sendto;__sys_sendto;tcp_sendmsg;\
              lock_sock_nested;_raw_spin_lock_bh",
                Group::Socket,
            ),
            (
                "tcp_write_xmit;__tcp_transmit_skb;ip_queue_xmit;__ip_queue_xmit;ip_finish_output2",
                Group::Ip,
            ),
            (
                "ip_finish_output2;__dev_queue_xmit;dev_hard_start_xmit;loopback_xmit",
                Group::Device,
            ),
            (
                "ip_finish_output2;__dev_queue_xmit;__dev_xmit_skb;pfifo_fast_enqueue",
                Group::Qdisc,
            ),
            (
                "ip_rcv;nf_hook_slow;nft_do_chain [nf_tables];nft_meta_get_eval [nf_tables]",
                Group::Netfilter,
            ),
            (
                "ip_rcv;nf_hook_slow;ipv4_conntrack_in [nf_conntrack];nf_conntrack_in [nf_conntrack];\
              __nf_conntrack_find_get [nf_conntrack]",
                Group::Conntrack,
            ),
            (
                "ip_output;ip_finish_output2;__dev_queue_xmit;dev_hard_start_xmit;veth_xmit [veth]",
                Group::Device,
            ),
            ("udp_sendmsg;ip_make_skb;__ip_append_data", Group::Ip),
            (
                "__x64_sys_recvfrom;__sys_recvfrom;inet_recvmsg;udp_recvmsg;__skb_recv_udp",
                Group::Udp,
            ),
            (
                "secondary_startup_64_no_verify;start_secondary;cpu_startup_entry;do_idle;\
              default_idle_call;default_idle;pv_native_safe_halt",
                Group::Idle,
            ),
            (
                "do_idle;schedule_idle;__schedule;finish_task_switch.isra.0",
                Group::Scheduler,
            ),
            (
                "entry_SYSCALL_64;do_syscall_64;__x64_sys_futex;do_futex;futex_wait",
                Group::Other,
            ),
            ("", Group::Other),
        ];
        for (s, want) in cases {
            let frames: Vec<String> = stack(s).iter().map(|f| f.trim().to_string()).collect();
            assert_eq!(classify(&frames), want, "{s}");
        }
    }

    #[test]
    fn softirq_context_is_read_from_the_stack() {
        let rx = stack(
            "tcp_sendmsg;__local_bh_enable_ip;do_softirq;handle_softirqs;net_rx_action;\
                        __napi_poll;process_backlog;__netif_receive_skb;ip_rcv;tcp_v4_rcv",
        );
        assert!(is_softirq(&rx));
        assert_eq!(classify(&rx), Group::Tcp);
        assert!(!is_softirq(&stack("entry_SYSCALL_64;tcp_sendmsg;tcp_push")));
        assert!(is_softirq(&stack(
            "ret_from_fork;kthread;smpboot_thread_fn;run_ksoftirqd"
        )));
    }

    #[test]
    fn every_group_is_documented() {
        let doc = include_str!("../../../docs/PROFILE.md");
        for g in Group::ALL {
            assert!(
                doc.contains(&format!("| {} |", g.name())),
                "docs/PROFILE.md's table lacks {g:?}"
            );
        }
        for f in SOFTIRQ_FRAMES {
            assert!(
                doc.contains(&format!("`{f}`")),
                "docs/PROFILE.md lacks the softirq frame {f}"
            );
        }
    }

    #[test]
    fn every_group_has_a_name_and_patterns() {
        for g in Group::ALL {
            assert!(!g.name().is_empty());
            if g != Group::Other {
                assert!(TABLE.iter().any(|(t, _)| *t == g), "{g:?} has patterns");
            }
        }
    }
}
