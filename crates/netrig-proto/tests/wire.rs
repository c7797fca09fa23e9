//! The wire format, kept on purpose: every message, with every nested
//! measurement type filled in, serialized as it goes on the control
//! connection and compared with a checked-in snapshot. The measurements
//! travel as the protocol's own types (`report::measure`: TCP_INFO, CPU, the
//! environment, …), converted from netrig-metrics' (whose conversions
//! `report::measure`'s tests hold with every field set): a field changed
//! here changes the wire, and this test makes that change visible, to be
//! made on purpose (with the protocol version and docs/PROTOCOL.md), never
//! by accident. (The result document is held by docs/result.schema.json,
//! which the integration tests check real output against.)
//!
//! Accept an intended change with `INSTA_UPDATE=always cargo test -p
//! netrig-proto --test wire` (or `cargo insta review`).

use netrig_proto::auth::{Bytes, HelloAuth, PublicKey, RequestAuth, WelcomeAuth};
use netrig_proto::report::measure::{
    Conntrack, CpuUsage, Environment, InterfaceCounters, LatencySummary, SeqInterval, SeqSummary, TcpInfo,
};
use netrig_proto::report::*;
use netrig_proto::spec::*;
use netrig_proto::{AgentLimits, AgentMsg, ClientMsg, Direction, SessionCookie, TestSpec};

fn spec() -> TestSpec {
    TestSpec {
        omit_s: 1.0,
        interval_s: Some(1.0),
        flows: 2,
        workers: Some(2),
        remote: SocketOptions {
            sndbuf: Some(1 << 20),
            rcvbuf: Some(1 << 20),
            tos: Some(0xb8),
            priority: Some(5),
            max_pacing_rate_bps: Some(1_000_000_000),
        },
        remote_cpus: Some(vec![0, 1]),
        remote_hooks: RemoteHooks {
            setup: Some("nft-stateless".into()),
            teardown: Some("nft-flush".into()),
        },
        profile: true,
        ..TestSpec::new(
            KindSpec::UdpStream(UdpStreamSpec {
                datagram_size: 1472,
                pace: Some(Pace {
                    rate_bps: 100_000_000,
                    pacing_us: Some(100),
                }),
                reverse: true,
                no_gso: true,
                datagram: Default::default(),
            }),
            Limit::Duration { seconds: 10.0 },
        )
    }
}

fn side_report() -> SideReport {
    let seq = SeqInterval {
        jitter_mean_us: Some(1.0),
        ..SeqInterval::default()
    };
    SideReport {
        flows: vec![FlowReport {
            id: 0,
            direction: Direction::Rx,
            role: Role::Receiver,
            window_bytes: 1,
            total_bytes: 2,
            window_s: 3.0,
            socket_buffers: SockBufReport::default(),
            applied: AppliedOptions::default(),
            tcp_info: Some(TcpInfo::default()),
            window_transactions: 0,
            udp: Some(UdpFlowReport {
                received: Some(SeqSummary::default()),
                window: Some(seq),
                ..UdpFlowReport::default()
            }),
            // tcp-crr's, as its requesters count them: a kind's own counts
            // travel as the kind names them.
            counts: KindCounts::one(
                "connect_errors",
                Counts::zeroed(&["refused", "timed_out", "addr_not_available", "reset", "other"]),
            ),
            zerocopy: None,
            reads: None,
            sends: Some(SendReport {
                calls: 9,
                notsent_lowat: Some(262_144),
            }),
        }],
        window_s: 3.0,
        warnings: vec!["a warning".into()],
        cpu: Some(CpuUsage::default()),
        cpu_window_s: Some(3.0),
        workers: vec![WorkerCpu {
            worker: 0,
            flows: 1,
            cpu_s: 0.5,
            busy_pct: 25.0,
            cpu: Some(1),
            last_cpu: Some(1),
        }],
        counters: Some(CounterReport {
            deltas: [("Udp.InDatagrams".to_string(), 5)].into_iter().collect(),
            conntrack: Some(Conntrack::default()),
        }),
        environment: Some(Environment::default()),
        latency: Some(LatencySummary::default()),
        latency_histogram: None,
        schedule: Some(ScheduleReport::default()),
        witness: Some(WitnessReport {
            tcp: Some(TcpWitness::default()),
            interfaces: vec![InterfaceCounters::default()],
            ..WitnessReport::default()
        }),
        one_way: Some(netrig_proto::clock::OneWayReport {
            zero_ns: 1_800_000_000_000_000_000,
            ref_ns: 1_799_999_999_999_000_000,
            received: Some("HISTOGRAM".into()),
            clocks: Default::default(),
        }),
        // The agent's end of `--profile`: here the words of an agent that does not allow it.
        profile: Some(netrig_proto::report::profile::EndProfile::Withheld {
            withheld:
                "profile withheld: the agent's operator did not allow profiles (netrig serve --allow-profile)"
                    .into(),
        }),
    }
}

/// Protocol 6's answer to `watch_end`, every part present.
fn host_view() -> netrig_proto::report::host::HostView {
    use netrig_proto::report::host::*;
    let pe = PeakEnd { peak: 2, end: 1 };
    HostView {
        window_s: 10.0,
        samples: 9,
        limit_s: None,
        cpu: Some(CpuUsage::default()),
        busiest_cpu: Some(CpuSplit::default()),
        cpu_withheld: None,
        counters: [("TcpExt.ListenOverflows".to_string(), 3412)].into(),
        counters_withheld: None,
        conntrack: Some(ConntrackView {
            max: Some(65536),
            drop: Some(0),
            early_drop: Some(0),
            insert_failed: Some(0),
            ..ConntrackView::default()
        }),
        conntrack_withheld: None,
        sockets: Some(SocketStates {
            established: pe,
            syn_recv: pe,
            time_wait: pe,
            close_wait: pe,
            fin_wait2: pe,
            sockstat_time_wait: Some(pe),
            orphan: Some(pe),
            partial: false,
        }),
        sockets_withheld: None,
        sysctls: [("net.core.somaxconn".to_string(), 4096)].into(),
    }
}

#[test]
fn client_messages() {
    let msgs = vec![
        ClientMsg::Hello {
            software: "netrig 0.1.0".into(),
            auth: HelloAuth {
                nonce: Bytes([2; 32]),
                client_key: None,
                signature: None,
            },
        },
        // An authenticated client's.
        ClientMsg::Hello {
            software: "netrig 0.1.0".into(),
            auth: HelloAuth {
                nonce: Bytes([2; 32]),
                client_key: Some(PublicKey(Bytes([3; 32]))),
                signature: Some(Bytes([4; 64])),
            },
        },
        ClientMsg::TestRequest {
            spec: spec(),
            auth: None,
        },
        ClientMsg::TestRequest {
            spec: spec(),
            auth: Some(RequestAuth {
                counter: 0,
                signature: Bytes([5; 64]),
            }),
        },
        ClientMsg::Go,
        ClientMsg::Abort {
            reason: "interrupted".into(),
        },
        ClientMsg::Bye,
        ClientMsg::Heartbeat,
        ClientMsg::WatchStart,
        ClientMsg::WatchEnd,
        ClientMsg::ClockProbe { seq: 3 },
    ];
    insta::assert_snapshot!(serde_json::to_string_pretty(&msgs).unwrap());
}

#[test]
fn agent_messages() {
    let msgs = vec![
        AgentMsg::Welcome {
            version: netrig_proto::PROTOCOL_VERSION,
            software: "netrig 0.1.0".into(),
            limits: AgentLimits::default(),
            auth: WelcomeAuth {
                required: false,
                nonce: Bytes([1; 32]),
                agent_key: None,
            },
            clock: None,
            name: None,
        },
        // An agent started with --hooks.
        AgentMsg::Welcome {
            version: netrig_proto::PROTOCOL_VERSION,
            software: "netrig 0.1.0".into(),
            limits: AgentLimits {
                hooks: vec!["nft-flush".into(), "nft-stateless".into()],
                hook_timeout_s: Some(30),
                ..AgentLimits::default()
            },
            // An agent with --key and --authorized-keys.
            auth: WelcomeAuth {
                required: true,
                nonce: Bytes([1; 32]),
                agent_key: Some(PublicKey(Bytes([6; 32]))),
            },
            clock: Some(netrig_proto::clock::AgentClock {
                boot_hash: netrig_proto::clock::boot_hash(&[1; 32], "0f4c2a4e-6c3b-4a8e-9d7e-2b1c3d4e5f60"),
            }),
            name: None,
        },
        AgentMsg::HelloAccepted { signature: None },
        AgentMsg::HelloAccepted {
            signature: Some(Bytes([7; 64])),
        },
        AgentMsg::VersionMismatch {
            agent_min: 1,
            agent_max: 2,
            software: "netrig 0.1.0".into(),
        },
        AgentMsg::Busy {
            reason: "full".into(),
        },
        AgentMsg::TestAccepted {
            cookie: SessionCookie([7; 16]),
            warnings: vec![],
        },
        AgentMsg::TestRejected { reason: "no".into() },
        AgentMsg::DataReady,
        AgentMsg::Interval {
            sample: Box::new(IntervalSample {
                udp: vec![Some(SeqInterval::default())],
                tcp_info: vec![Some(TcpInfo::default())],
                latency: Some(LatencySummary::default()),
                ..IntervalSample::default()
            }),
        },
        AgentMsg::Results {
            report: Box::new(side_report()),
        },
        AgentMsg::Error {
            message: "gave up".into(),
        },
        AgentMsg::Heartbeat,
        AgentMsg::WatchStarted { limit_s: 3630 },
        AgentMsg::WatchRejected { reason: "no".into() },
        AgentMsg::HostView {
            view: Box::new(host_view()),
        },
        AgentMsg::ClockEcho {
            seq: 3,
            received_ns: 1_800_000_000_000_000_000,
            sent_ns: 1_800_000_000_000_012_000,
        },
    ];
    insta::assert_snapshot!(serde_json::to_string_pretty(&msgs).unwrap());
}

/// What is snapshotted reads back as it was.
#[test]
fn messages_read_back_equal() {
    let r = AgentMsg::Results {
        report: Box::new(side_report()),
    };
    let back: AgentMsg = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    let t = ClientMsg::TestRequest {
        spec: spec(),
        auth: None,
    };
    let back: ClientMsg = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(back, t);
}
