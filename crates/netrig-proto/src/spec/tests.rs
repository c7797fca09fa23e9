use super::*;

fn stream(message_size: u32) -> StreamOptions {
    StreamOptions {
        message_size,
        recv_size: message_size,
        ..StreamOptions::default()
    }
}

pub(crate) fn spec() -> TestSpec {
    TestSpec {
        flows: 2,
        ..TestSpec::new(
            KindSpec::TcpBidir(TcpBidirSpec::default()),
            Limit::Duration { seconds: 10.0 },
        )
    }
}

fn with(test: KindSpec) -> TestSpec {
    TestSpec { test, ..spec() }
}

fn rr(load: Load) -> KindSpec {
    KindSpec::TcpRr(TcpRrSpec {
        transactions: Transactions {
            busy_wait: false,
            load,
            ..Transactions::default()
        },
        ..TcpRrSpec::default()
    })
}

fn err(s: &TestSpec) -> String {
    s.validate(&AgentLimits::default()).unwrap_err().to_string()
}

/// An option this build does not know is refused by name, never run
/// without; options at their defaults stay off the wire; an option of
/// another kind cannot be said at all.
#[test]
fn unknown_fields_are_refused_and_defaults_left_out() {
    let s = spec();
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["test"]["kind"], "tcp-bidir");
    for absent in ["remote", "remote_cpus", "omit_s", "interval_s", "workers"] {
        assert!(v.get(absent).is_none(), "{absent} at its default was sent: {v}");
    }
    for absent in [
        "pace",
        "zerocopy",
        "skip_rx_copy",
        "msg_zerocopy",
        "no_rcvlowat",
        "notsent_lowat",
        "tcp",
    ] {
        assert!(
            v["test"].get(absent).is_none(),
            "{absent} at its default was sent: {v}"
        );
    }
    let back: TestSpec = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(back, s);
    let mut newer = v.clone();
    newer["frobnicate"] = serde_json::json!(true);
    let e = serde_json::from_value::<TestSpec>(newer).unwrap_err().to_string();
    assert!(e.contains("unknown field `frobnicate`"), "{e}");
    let mut nested = v.clone();
    nested["remote"] = serde_json::json!({"tx_ring": 4096});
    let e = serde_json::from_value::<TestSpec>(nested)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `tx_ring`"), "{e}");
    // Another kind's option on this kind: not expressible, refused by name.
    for (kind_field, value) in [
        ("reverse", serde_json::json!(true)),
        ("transactions", serde_json::json!({})),
    ] {
        let mut other = v.clone();
        other["test"][kind_field] = value;
        let e = serde_json::from_value::<TestSpec>(other).unwrap_err().to_string();
        assert!(e.contains(&format!("unknown field `{kind_field}`")), "{e}");
    }
    let mut udp = serde_json::to_value(with(KindSpec::UdpStream(UdpStreamSpec::default()))).unwrap();
    udp["test"]["tcp"] = serde_json::json!({"nodelay": true});
    let e = serde_json::from_value::<TestSpec>(udp).unwrap_err().to_string();
    assert!(e.contains("unknown field `tcp`"), "{e}");
    let mut limit = v.clone();
    limit["limit"] = serde_json::json!({"bytes": {"bytes": 5, "seconds": 3}});
    let e = serde_json::from_value::<TestSpec>(limit).unwrap_err().to_string();
    assert!(e.contains("unknown field `seconds`"), "{e}");
    let mut unknown = v;
    unknown["test"]["kind"] = serde_json::json!("sctp-stream");
    let e = serde_json::from_value::<TestSpec>(unknown)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown variant `sctp-stream`"), "{e}");
}

/// Every kind's spec reads back as it was written, with every option set.
#[test]
fn every_kind_round_trips() {
    let tcp = TcpOptions {
        nodelay: true,
        congestion: Some("reno".into()),
        mptcp: true,
    };
    let pace = Some(Pace {
        rate_bps: 1_000_000,
        pacing_us: Some(500),
    });
    let open = Transactions {
        busy_wait: false,
        request_size: 64,
        response_size: 1024,
        load: Load::Open {
            rate: 1000.5,
            poisson: true,
            spin_us: Some(7),
        },
    };
    let streams = StreamOptions {
        message_size: 1000,
        recv_size: 2000,
        pace: pace.clone(),
        zerocopy: true,
        skip_rx_copy: true,
        msg_zerocopy: false,
        no_rcvlowat: true,
        notsent_lowat: Some(65536),
        tcp: tcp.clone(),
    };
    let kinds = [
        KindSpec::TcpStream(TcpStreamSpec(streams.clone())),
        KindSpec::TcpMaerts(TcpMaertsSpec(streams.clone())),
        KindSpec::TcpBidir(TcpBidirSpec(streams)),
        KindSpec::TcpRr(TcpRrSpec {
            transactions: open.clone(),
            tcp: tcp.clone(),
        }),
        KindSpec::TcpCrr(TcpCrrSpec {
            transactions: open.clone(),
            timeout_s: Some(0.5),
            tcp: tcp.clone(),
            close_first: crate::spec::CloseFirst::Responder,
            local_ports: Some(crate::spec::PortRange {
                low: 5000,
                high: 65535,
            }),
        }),
        KindSpec::TcpCc(crate::spec::kind::TcpCcSpec {
            load: open.load.clone(),
            timeout_s: Some(0.25),
            tcp,
            local_ports: Some(crate::spec::PortRange {
                low: 6000,
                high: 7000,
            }),
        }),
        KindSpec::UdpStream(UdpStreamSpec {
            datagram_size: 64,
            pace,
            reverse: true,
            no_gso: true,
            datagram: Default::default(),
        }),
        KindSpec::UdpRr(UdpRrSpec {
            transactions: open,
            timeout_s: Some(2.0),
        }),
        KindSpec::Http(crate::spec::kind::HttpSpec {
            url_host: Some("example.org".into()),
            url_port: Some(8443),
            host_header: Some("example.org:8443".into()),
            path: "/bytes/1024?x=1".into(),
            method: crate::spec::kind::HttpMethod::Head,
            headers: vec!["Accept: */*".into()],
            requests: Some(1000),
            load: crate::spec::kind::HttpLoad::Open {
                rate: 500.5,
                poisson: true,
            },
            new_conn: true,
            timeout_s: Some(0.25),
            max_header: Some(4096),
            max_body: Some(1 << 20),
            tls: Some(crate::spec::kind::HttpTls {
                insecure: true,
                ca_file: Some("/tmp/ca.pem".into()),
            }),
            tcp: TcpOptions {
                nodelay: true,
                congestion: None,
                mptcp: false,
            },
        }),
        KindSpec::SynFlood(crate::spec::kind::SynFloodSpec { rate_pps: 1234 }),
        KindSpec::HalfClose(crate::spec::kind::HalfCloseSpec {
            connections: 77,
            how: crate::spec::kind::HalfCloseHow::Shutdown,
            request: "x".into(),
            watch_s: 3.5,
            to_port: Some(8080),
        }),
    ];
    assert_eq!(kinds.len(), KindSpec::NAMES.len());
    for (k, name) in kinds.into_iter().zip(KindSpec::NAMES) {
        let s = TestSpec {
            omit_s: 1.0,
            interval_s: Some(0.5),
            workers: Some(2),
            remote: SocketOptions {
                sndbuf: Some(1 << 20),
                rcvbuf: Some(1 << 21),
                tos: Some(0x10),
                priority: Some(3),
                max_pacing_rate_bps: Some(1_000_000),
            },
            remote_cpus: Some(vec![0, 1]),
            ..with(k)
        };
        assert_eq!(s.kind(), *name);
        assert_eq!(s.validate(&AgentLimits::default()), Ok(()), "{name}");
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<TestSpec>(&text).unwrap(), s, "{text}");
    }
}

#[test]
fn worker_buffers_and_workers_are_bounded_by_what_the_spec_asks() {
    let mut o = stream(1 << 20);
    o.recv_size = 1 << 19;
    let mut s = with(KindSpec::TcpStream(TcpStreamSpec(o.clone())));
    assert_eq!(s.worker_buffer_bytes(), (1 << 20) + (1 << 19));
    o.zerocopy = true;
    s.test = KindSpec::TcpStream(TcpStreamSpec(o));
    assert_eq!(s.worker_buffer_bytes(), (2 << 20) + (1 << 19));
    s.test = KindSpec::UdpStream(UdpStreamSpec::default());
    assert_eq!(s.worker_buffer_bytes(), 2 * 64 * 65_536);
    s.test = KindSpec::UdpRr(UdpRrSpec::default());
    assert_eq!(s.worker_buffer_bytes(), 2 * 64 * 65_536 + 2);
    // One per CPU, never more than the flows (2 flows one way here).
    s.flows = 2;
    assert_eq!(s.workers_on(8), 2);
    assert_eq!(s.workers_on(1), 1);
    s.workers = Some(16);
    assert_eq!(s.workers_on(1), 2);
    let limits = AgentLimits {
        max_workers: 8,
        ..AgentLimits::default()
    };
    let e = s.validate(&limits).unwrap_err().to_string();
    assert!(
        e.contains("-T/--workers 16") && e.contains("--max-workers"),
        "{e}"
    );
}

#[test]
fn udp_options() {
    let l = AgentLimits::default();
    let mut u = UdpStreamSpec {
        datagram_size: 27,
        ..UdpStreamSpec::default()
    };
    let mut s = with(KindSpec::UdpStream(u.clone()));
    assert!(err(&s).contains("28-byte"));
    u.datagram_size = 64;
    s.test = KindSpec::UdpStream(u.clone());
    assert!(s.validate(&l).is_ok());
    assert_eq!(s.flow_plan(), vec![Direction::Tx, Direction::Tx]);
    u.reverse = true;
    s.test = KindSpec::UdpStream(u.clone());
    assert_eq!(s.flow_plan(), vec![Direction::Rx, Direction::Rx]);
    u.pace = Some(Pace {
        rate_bps: 0,
        pacing_us: None,
    });
    s.test = KindSpec::UdpStream(u.clone());
    assert!(err(&s).contains("-b/--bitrate"));
    u.pace = Some(Pace {
        rate_bps: 1_000_000,
        pacing_us: Some(0),
    });
    s.test = KindSpec::UdpStream(u);
    assert!(err(&s).contains("--pacing-us"));
    let r = UdpRrSpec {
        transactions: Transactions {
            busy_wait: false,
            request_size: 70_000,
            ..Transactions::default()
        },
        ..UdpRrSpec::default()
    };
    assert!(err(&with(KindSpec::UdpRr(r.clone()))).contains("for UDP"));
    assert_eq!(
        UdpRrSpec::default().datagram_size(),
        Some(UDP_HEADER_LEN),
        "requests carry the header"
    );
}

/// netrig's datagrams stay off the JSON (the wire and saved results as they
/// were); iperf3's are said, and a datagram must hold the header.
#[test]
fn udp_stream_datagram_formats() {
    let json = |u: &UdpStreamSpec| serde_json::to_value(u).unwrap();
    let netrig = UdpStreamSpec::default();
    assert!(json(&netrig).get("datagram").is_none());
    let back: UdpStreamSpec = serde_json::from_value(json(&netrig)).unwrap();
    assert_eq!(back.datagram, DatagramFormat::Netrig);
    for (format, name, head) in [
        (DatagramFormat::Iperf3, "iperf3", 12),
        (DatagramFormat::Iperf3Counter64, "iperf3-64", 16),
    ] {
        let mut u = UdpStreamSpec {
            datagram: format,
            datagram_size: head,
            ..UdpStreamSpec::default()
        };
        assert_eq!(json(&u)["datagram"], name);
        assert_eq!(serde_json::from_value::<UdpStreamSpec>(json(&u)).unwrap(), u);
        assert!(with(KindSpec::UdpStream(u.clone()))
            .validate(&AgentLimits::default())
            .is_ok());
        u.datagram_size = head - 1;
        let e = err(&with(KindSpec::UdpStream(u)));
        assert!(
            e.contains(&format!("{head}-byte header")) && e.contains("iperf3's"),
            "{e}"
        );
    }
    let mut v = json(&netrig);
    v["datagram"] = "iperf2".into();
    assert!(serde_json::from_value::<UdpStreamSpec>(v).is_err());
}

#[test]
fn rr_options_are_bounded() {
    let l = AgentLimits::default();
    assert!(with(rr(Load::Closed { burst: 1 })).validate(&l).is_ok());
    assert!(err(&with(rr(Load::Closed { burst: 0 }))).contains("--burst"));
    assert!(err(&with(rr(Load::Closed {
        burst: MAX_IN_FLIGHT + 1
    })))
    .contains("--burst"));
    let open = |rate: f64, spin_us| Load::Open {
        rate,
        poisson: false,
        spin_us,
    };
    assert!(err(&with(rr(open(f64::INFINITY, None)))).contains("--rate"));
    assert!(err(&with(rr(open(0.0, None)))).contains("--rate"));
    assert!(with(rr(open(1000.0, Some(MAX_SPIN_US)))).validate(&l).is_ok());
    assert!(err(&with(rr(open(1000.0, Some(MAX_SPIN_US + 1))))).contains("--spin-us"));
    let mut s = with(KindSpec::TcpRr(TcpRrSpec {
        transactions: Transactions {
            busy_wait: false,
            response_size: 0,
            ..Transactions::default()
        },
        ..TcpRrSpec::default()
    }));
    assert!(err(&s).contains("-r/--request-response"));
    s.test = rr(Load::Closed { burst: 1 });
    s.limit = Limit::Bytes { bytes: 10 };
    assert_eq!(
        err(&s),
        "-n/--bytes 10: tcp-rr runs for -l seconds, not to a byte count"
    );
    s.limit = Limit::Duration { seconds: 1.0 };
    s.workers = Some(0);
    assert!(err(&s).contains("-T/--workers"));
}

#[test]
fn crr_opens_no_connection_at_set_up_and_bounds_its_options() {
    let l = AgentLimits::default();
    let mut c = TcpCrrSpec::default();
    let mut s = TestSpec {
        flows: 3,
        ..with(KindSpec::TcpCrr(c.clone()))
    };
    assert_eq!(s.connections(), 0);
    assert_eq!(s.flow_plan(), vec![Direction::Tx; 3]);
    assert!(s.validate(&l).is_ok());
    assert_eq!(c.timeout(), std::time::Duration::from_secs(1));
    c.transactions.load = Load::Closed {
        burst: MAX_CRR_IN_FLIGHT + 1,
    };
    s.test = KindSpec::TcpCrr(c.clone());
    assert!(err(&s).contains("1..=1024 connections per flow"), "{}", err(&s));
    c.transactions.load = Load::Closed { burst: 1 };
    for bad in [0.0, -1.0, f64::NAN, 61.0] {
        c.timeout_s = Some(bad);
        s.test = KindSpec::TcpCrr(c.clone());
        assert!(err(&s).contains("--timeout"), "{bad}");
    }
    c.timeout_s = Some(0.25);
    for (low, high) in [(0, 10), (2000, 1999)] {
        c.local_ports = Some(PortRange { low, high });
        s.test = KindSpec::TcpCrr(c.clone());
        assert!(err(&s).contains("--local-ports"), "{low}-{high}: {}", err(&s));
    }
    c.local_ports = Some(PortRange { low: 7, high: 7 });
    s.test = KindSpec::TcpCrr(c);
    assert!(s.validate(&l).is_ok());
}

#[test]
fn local_ports_parse_as_low_dash_high() {
    assert_eq!(
        PortRange::parse("5000-65535"),
        Ok(PortRange {
            low: 5000,
            high: 65535
        })
    );
    assert_eq!(PortRange::parse("80-80").map(|r| r.len()), Ok(1));
    assert_eq!(PortRange::parse("1-65535").map(|r| r.len()), Ok(65535));
    for bad in [
        "", "5000", "5000-", "-5000", "0-10", "10-9", "1-65536", "a-b", "1-2-3",
    ] {
        let e = PortRange::parse(bad).unwrap_err();
        assert!(e.contains("LOW") && e.contains("HIGH"), "{bad:?}: {e}");
    }
}

#[test]
fn roles() {
    use crate::report::Role;
    let role = |k: KindSpec, d, agent| with(k).role(d, agent);
    let ts = || KindSpec::TcpStream(TcpStreamSpec::default());
    assert_eq!(role(ts(), Direction::Tx, false), Role::Sender);
    assert_eq!(role(ts(), Direction::Tx, true), Role::Receiver);
    let m = KindSpec::TcpMaerts(TcpMaertsSpec::default());
    assert_eq!(role(m, Direction::Rx, true), Role::Sender);
    let r = || rr(Load::Closed { burst: 1 });
    assert_eq!(role(r(), Direction::Tx, false), Role::Requester);
    assert_eq!(role(r(), Direction::Tx, true), Role::Responder);
    let c = || KindSpec::TcpCrr(TcpCrrSpec::default());
    assert_eq!(role(c(), Direction::Tx, false), Role::Requester);
    assert_eq!(role(c(), Direction::Tx, true), Role::Responder);
}

#[test]
fn bidir_plan_puts_tx_first() {
    assert_eq!(
        spec().flow_plan(),
        vec![Direction::Tx, Direction::Tx, Direction::Rx, Direction::Rx]
    );
    assert_eq!(spec().connections(), 4);
}

#[test]
fn byte_quota_spreads_remainder() {
    let mut s = spec();
    s.flows = 3;
    s.limit = Limit::Bytes { bytes: 10 };
    let q: Vec<u64> = (0..3).map(|i| s.byte_quota(i).unwrap()).collect();
    assert_eq!(q, vec![4, 3, 3]);
    assert_eq!(q.iter().sum::<u64>(), 10);
}

/// Issue #7, item 9: a bound error names the option, the limit and
/// which end imposed it; netrig's own bounds never read as an agent's,
/// and are never printed as a range up to an internal maximum.
#[test]
fn bound_errors_say_whose_limit_it_is() {
    let l = AgentLimits {
        max_duration_s: 5,
        max_flows: 2,
        max_message_size: 1000,
        ..AgentLimits::default()
    };
    let mut s = with(KindSpec::TcpBidir(TcpBidirSpec(stream(1000))));
    s.limit = Limit::Duration { seconds: 5.0 };
    assert_eq!(s.validate(&l), Ok(()));
    s.limit = Limit::Duration { seconds: 6.0 };
    let e = s.validate(&l).unwrap_err();
    assert_eq!(
        e.to_string(),
        "-l/--length 6: the agent allows at most 5 seconds (its --max-duration)"
    );
    assert_eq!(
        e.at_agent("the agent at 127.0.0.1:7000"),
        "-l/--length 6: the agent at 127.0.0.1:7000 allows at most 5 seconds (its --max-duration)"
    );
    assert_eq!(
        s.validate_bounds(),
        Ok(()),
        "no agent limit is checked before an agent is reached"
    );
    for bad in [0.0, -1.0, f64::INFINITY] {
        s.limit = Limit::Duration { seconds: bad };
        for e in [s.validate(&l).unwrap_err(), s.validate_bounds().unwrap_err()] {
            let m = e.to_string();
            assert!(
                m.starts_with(&format!("-l/--length {bad}: must be more than 0 seconds")),
                "{m}"
            );
            assert_eq!(
                e.at_agent("the agent at x"),
                m,
                "netrig's own bound is nobody's limit but netrig's"
            );
        }
    }
    s.limit = Limit::Duration { seconds: 4.0 };
    s.interval_s = Some(6.0);
    assert_eq!(
        s.validate(&l).unwrap_err().to_string(),
        "-i/--interval 6: the agent allows at most 5 seconds (its --max-duration)"
    );
    s.interval_s = Some(0.01);
    assert_eq!(
        s.validate_bounds().unwrap_err().to_string(),
        "-i/--interval 0.01: must be at least 0.1 seconds (and finite)"
    );
    s.interval_s = None;
    s.flows = 3;
    assert_eq!(
        s.validate(&l).unwrap_err().to_string(),
        "-P/--parallel 3: the agent allows at most 2 flows per direction (its --max-flows)"
    );
    s.flows = 0;
    assert_eq!(
        s.validate_bounds().unwrap_err().to_string(),
        "-P/--parallel 0: must be at least 1 flow"
    );
    s.flows = 1;
    s.test = KindSpec::TcpBidir(TcpBidirSpec(StreamOptions {
        message_size: 2000,
        ..stream(1000)
    }));
    assert_eq!(
        s.validate(&l).unwrap_err().to_string(),
        "-m/--message-size 2000: the agent allows at most 1000 bytes (its limit on message sizes)"
    );
    s.test = KindSpec::TcpBidir(TcpBidirSpec(StreamOptions {
        recv_size: 1001,
        ..stream(1000)
    }));
    assert!(s
        .validate(&l)
        .unwrap_err()
        .to_string()
        .starts_with("-M/--recv-size 1001: the agent allows"));
    s.test = KindSpec::TcpRr(TcpRrSpec {
        transactions: Transactions {
            busy_wait: false,
            request_size: 2000,
            ..Transactions::default()
        },
        ..TcpRrSpec::default()
    });
    assert_eq!(
        s.validate(&l).unwrap_err().to_string(),
        "-r/--request-response request size 2000: the agent allows at most 1000 bytes (its limit on message sizes)"
    );
    assert!(s.validate_bounds().is_ok());
}

#[test]
fn validation_names_the_option() {
    let mut s = with(KindSpec::TcpStream(TcpStreamSpec(stream(0))));
    assert!(err(&s).contains("-m/--message-size"));
    s = spec();
    s.flows = AgentLimits::default().max_flows + 1;
    assert!(err(&s).contains("-P"));
    s = spec();
    s.limit = Limit::Duration { seconds: f64::NAN };
    assert!(s.validate(&AgentLimits::default()).is_err());
    s = spec();
    s.omit_s = 10.0;
    assert!(err(&s).contains("--omit"));
    s = spec();
    s.limit = Limit::Bytes { bytes: 100 };
    s.omit_s = 1.0;
    assert!(err(&s).contains("--omit"));
    s = with(KindSpec::TcpStream(TcpStreamSpec(StreamOptions {
        tcp: TcpOptions {
            nodelay: false,
            congestion: Some("../../etc".into()),
            mptcp: false,
        },
        ..StreamOptions::default()
    })));
    assert!(err(&s).contains("--cc"));
    s = spec();
    s.remote.priority = Some(8);
    assert!(err(&s).contains("--priority"));
    s = spec();
    s.interval_s = Some(0.01);
    assert!(err(&s).contains("-i"));
    assert!(spec().validate(&AgentLimits::default()).is_ok());
    assert!(validate_mss(87).is_err() && validate_mss(1460).is_ok());
}

#[test]
fn hook_names_are_names_never_paths() {
    for good in ["nft-stateless", "a", "A.b_c-9", "0", &"x".repeat(MAX_HOOK_NAME)] {
        assert!(is_hook_name(good), "{good}");
    }
    for bad in [
        "",
        "../x",
        "/bin/sh",
        "x/y",
        ".",
        "..",
        ".hidden",
        "-rf",
        "_x",
        "a b",
        "a;b",
        "$(reboot)",
        "a\nb",
        "é",
        "x\0",
        &"x".repeat(MAX_HOOK_NAME + 1),
    ] {
        assert!(!is_hook_name(bad), "{bad:?}");
    }
}

fn hooked(setup: Option<&str>, teardown: Option<&str>) -> TestSpec {
    TestSpec {
        remote_hooks: RemoteHooks {
            setup: setup.map(str::to_string),
            teardown: teardown.map(str::to_string),
        },
        ..spec()
    }
}

/// A path or a command line is refused by netrig's own bounds, before any
/// agent is asked, naming the option and showing the name escaped.
#[test]
fn a_path_like_hook_name_is_refused_by_validate() {
    let offered = AgentLimits {
        hooks: vec!["x".into(), "sh".into()],
        ..AgentLimits::default()
    };
    for (s, option) in [
        (hooked(Some("../x"), None), "--remote-setup"),
        (hooked(None, Some("/bin/sh")), "--remote-teardown"),
        (hooked(Some("x"), Some("sh -c reboot")), "--remote-teardown"),
    ] {
        let e = s.validate_bounds().unwrap_err().to_string();
        assert!(e.starts_with(option), "{e}");
        assert!(e.contains("never a path or a command"), "{e}");
        assert_eq!(s.validate(&offered).unwrap_err().to_string(), e);
    }
    let long = hooked(Some(&format!("{}\u{1b}[2J", "y".repeat(5000))), None);
    let e = long.validate_bounds().unwrap_err().to_string();
    assert!(e.len() < 400 && !e.contains('\u{1b}'), "{e}");
}

#[test]
fn a_hook_the_agent_does_not_offer_is_refused_naming_what_it_offers() {
    let s = hooked(Some("nft-stateless"), Some("nft-flush"));
    assert_eq!(
        s.validate_bounds(),
        Ok(()),
        "a valid name, whatever the agent offers"
    );
    assert_eq!(
        err(&s),
        "--remote-setup nft-stateless: the agent offers no hooks (start it with --hooks DIR)"
    );
    let mut l = AgentLimits {
        hooks: vec!["nft-flush".into(), "other".into()],
        ..AgentLimits::default()
    };
    let e = s.validate(&l).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--remote-setup nft-stateless: the agent offers no hook of that name; it offers nft-flush, other"
    );
    assert_eq!(
        e.at_agent("the agent at 192.0.2.1:6387"),
        "--remote-setup nft-stateless: the agent at 192.0.2.1:6387 offers no hook of that name; it offers \
         nft-flush, other"
    );
    l.hooks.push("nft-stateless".into());
    assert_eq!(s.validate(&l), Ok(()));
    assert!(hooked(None, Some("other")).validate(&l).is_ok());
}

/// No hooks: nothing on the wire (an older agent runs the test); hooks:
/// named in `remote_hooks`, whose unknown fields are refused like the spec's.
#[test]
fn hooks_on_the_wire() {
    let v = serde_json::to_value(spec()).unwrap();
    assert!(v.get("remote_hooks").is_none(), "{v}");
    let s = hooked(Some("a"), None);
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["remote_hooks"], serde_json::json!({"setup": "a"}));
    assert_eq!(serde_json::from_value::<TestSpec>(v.clone()).unwrap(), s);
    let mut bad = v.clone();
    bad["remote_hooks"]["args"] = serde_json::json!(["-x"]);
    let e = serde_json::from_value::<TestSpec>(bad).unwrap_err().to_string();
    assert!(e.contains("unknown field `args`"), "{e}");
}

#[test]
fn limits_read_as_a_person_says_them() {
    assert_eq!(Limit::Duration { seconds: 2.0 }.to_string(), "2 s");
    assert_eq!(Limit::Bytes { bytes: 1 << 30 }.to_string(), "1073741824 bytes");
}

/// Under an agent's `--max-rate` a test must state its rate, all flows
/// together within the cap in each direction; closed-loop request/response
/// is clocked by its answers and runs.
#[test]
fn a_rate_cap_refuses_unpaced_streams_and_rates_above_it() {
    let capped = AgentLimits {
        max_rate_bps: Some(1_000_000_000),
        ..AgentLimits::default()
    };
    let paced = |bps: u64, flows: u32, reverse: bool| TestSpec {
        flows,
        ..with(KindSpec::UdpStream(UdpStreamSpec {
            pace: Some(Pace {
                rate_bps: bps,
                pacing_us: None,
            }),
            reverse,
            ..UdpStreamSpec::default()
        }))
    };
    // -R without -b: 42 Gbit/s on loopback before this cap existed.
    let unpaced = TestSpec {
        flows: 1,
        ..with(KindSpec::UdpStream(UdpStreamSpec {
            reverse: true,
            ..UdpStreamSpec::default()
        }))
    };
    let e = unpaced.validate(&capped).unwrap_err().to_string();
    assert!(
        e.contains("-b/--bitrate not given")
            && e.contains("1 Gbit/s per direction")
            && e.contains("--max-rate"),
        "{e}"
    );
    unpaced.validate(&AgentLimits::default()).unwrap();
    paced(500_000_000, 2, true).validate(&capped).unwrap();
    let e = paced(600_000_000, 2, false)
        .validate(&capped)
        .unwrap_err()
        .to_string();
    assert!(e.contains("offers 1.2 Gbit/s (2 flows)"), "{e}");
    // tcp-bidir paced: each direction carries the flows' rate.
    let bidir = TestSpec {
        flows: 2,
        ..with(KindSpec::TcpBidir(TcpBidirSpec(StreamOptions {
            pace: Some(Pace {
                rate_bps: 400_000_000,
                pacing_us: None,
            }),
            ..stream(1000)
        })))
    };
    bidir.validate(&capped).unwrap();
    // Open loop: responses of 1 MB at 200/s are 1.6 Gbit/s from the agent.
    let open = TestSpec {
        flows: 1,
        ..with(KindSpec::TcpRr(TcpRrSpec {
            transactions: Transactions {
                busy_wait: false,
                request_size: 64,
                response_size: 1_000_000,
                load: Load::Open {
                    rate: 200.0,
                    poisson: false,
                    spin_us: None,
                },
            },
            ..TcpRrSpec::default()
        }))
    };
    let e = open.validate(&capped).unwrap_err().to_string();
    assert!(e.contains("--rate offers 1.6 Gbit/s"), "{e}");
    with(rr(Load::Closed { burst: 4 })).validate(&capped).unwrap();
}

#[test]
fn a_sender_uses_sendfile_or_msg_zerocopy_not_both() {
    let mut o = StreamOptions {
        msg_zerocopy: true,
        ..StreamOptions::default()
    };
    let s = with(KindSpec::TcpStream(TcpStreamSpec(o.clone())));
    assert_eq!(s.validate(&AgentLimits::default()), Ok(()));
    o.zerocopy = true;
    let e = with(KindSpec::TcpStream(TcpStreamSpec(o)))
        .validate(&AgentLimits::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--msg-zerocopy") && e.contains("not both"), "{e}");
}

/// Issue #37 (25): a udp-rr client asking for 65,000-byte answers to
/// 28-byte requests drew 719 times what it sent. Under the agent's
/// `--max-amplification` a UDP answer may be at most that many times its
/// request (both with netrig's header); TCP kinds and an agent without the
/// bound are not concerned.
#[test]
fn udp_answers_larger_than_the_agents_amplification_bound_are_refused() {
    let bound = |n: u32| AgentLimits {
        max_amplification: Some(n),
        ..AgentLimits::default()
    };
    let udp_rr = |req: u32, resp: u32| {
        with(KindSpec::UdpRr(UdpRrSpec {
            transactions: Transactions {
                request_size: req,
                response_size: resp,
                ..Transactions::default()
            },
            ..UdpRrSpec::default()
        }))
    };
    let e = udp_rr(28, 65_000).validate(&bound(1)).unwrap_err().to_string();
    assert!(
        e.contains("-r/--request-response")
            && e.contains("65000-byte answers to 28-byte requests")
            && e.contains("the agent allows at most UDP answers 1 times")
            && e.contains("--max-amplification"),
        "{e}"
    );
    // netrig's 28-byte header: -r 1,1 is two 28-byte datagrams; 1,28 too.
    udp_rr(1, 1).validate(&bound(1)).unwrap();
    udp_rr(1, 28).validate(&bound(1)).unwrap();
    udp_rr(1, 29).validate(&bound(1)).unwrap_err();
    udp_rr(100, 400).validate(&bound(4)).unwrap();
    udp_rr(100, 401).validate(&bound(4)).unwrap_err();
    udp_rr(28, 65_000).validate(&bound(2322)).unwrap();
    udp_rr(28, 65_000).validate(&AgentLimits::default()).unwrap();
    // TCP answers are held by the client's window (and the agent's --max-rate).
    with(KindSpec::TcpRr(TcpRrSpec {
        transactions: Transactions {
            request_size: 1,
            response_size: 1 << 20,
            ..Transactions::default()
        },
        ..TcpRrSpec::default()
    }))
    .validate(&bound(1))
    .unwrap();
}

/// Issue #37 (27): `null` was taken as the default on optional fields of
/// type `Option` (`workers`, `interval_s`, `remote.sndbuf`, `pace`,
/// `notsent_lowat`, ...) but refused on the others. One rule now: `null` is
/// not a value anywhere in a spec; an option is left out for its default.
/// Every optional field of every kind's type is tried, each refused naming
/// the field; left out, each spec is taken.
#[test]
fn null_is_refused_on_every_field_of_every_kind_naming_the_field() {
    let base = |test: serde_json::Value| serde_json::json!({"test": test, "limit": {"duration": {"seconds": 1.0}}, "flows": 1});
    let stream = serde_json::json!({"kind": "tcp-stream", "message_size": 1000, "recv_size": 1000});
    let txn = serde_json::json!({"request_size": 1, "response_size": 1, "load": {"closed": {"burst": 1}}});
    let open = serde_json::json!({"request_size": 1, "response_size": 1,
                                  "load": {"open": {"rate": 10.0, "poisson": false}}});
    // (where, the field): each spec with the field set to null.
    let mut cases: Vec<(serde_json::Value, &str)> = Vec::new();
    for f in ["interval_s", "workers", "remote_cpus"] {
        let mut v = base(stream.clone());
        v[f] = serde_json::Value::Null;
        cases.push((v, f));
    }
    for f in ["sndbuf", "rcvbuf", "tos", "priority", "max_pacing_rate_bps"] {
        let mut v = base(stream.clone());
        v["remote"] = serde_json::json!({ f: null });
        cases.push((v, f));
    }
    for f in ["setup", "teardown"] {
        let mut v = base(stream.clone());
        v["remote_hooks"] = serde_json::json!({ f: null });
        cases.push((v, f));
    }
    for kind in ["tcp-stream", "tcp-maerts", "tcp-bidir"] {
        for f in ["pace", "notsent_lowat"] {
            let mut t = stream.clone();
            t["kind"] = kind.into();
            t[f] = serde_json::Value::Null;
            cases.push((base(t), f));
        }
        let mut t = stream.clone();
        t["kind"] = kind.into();
        t["tcp"] = serde_json::json!({"congestion": null});
        cases.push((base(t), "congestion"));
    }
    let mut paced = stream.clone();
    paced["pace"] = serde_json::json!({"rate_bps": 1000000, "pacing_us": null});
    cases.push((base(paced), "pacing_us"));
    let udp = serde_json::json!({"kind": "udp-stream", "datagram_size": 1000, "pace": null});
    cases.push((base(udp), "pace"));
    for (kind, f) in [
        ("tcp-crr", "timeout_s"),
        ("tcp-crr", "local_ports"),
        ("udp-rr", "timeout_s"),
    ] {
        let t = serde_json::json!({"kind": kind, "transactions": txn.clone(), f: null});
        cases.push((base(t), f));
    }
    for kind in ["tcp-rr", "tcp-crr"] {
        let t = serde_json::json!({"kind": kind, "transactions": txn.clone(), "tcp": {"congestion": null}});
        cases.push((base(t), "congestion"));
    }
    let mut spin = open.clone();
    spin["load"]["open"]["spin_us"] = serde_json::Value::Null;
    cases.push((
        base(serde_json::json!({"kind": "tcp-rr", "transactions": spin})),
        "spin_us",
    ));
    let http = serde_json::to_value(TestSpec {
        flows: 1,
        ..with(KindSpec::Http(HttpSpec::default()))
    })
    .unwrap();
    for f in [
        "url_host",
        "url_port",
        "host_header",
        "requests",
        "timeout_s",
        "max_header",
        "max_body",
        "tls",
    ] {
        let mut v = http.clone();
        v["test"][f] = serde_json::Value::Null;
        cases.push((v, f));
    }
    let mut v = http.clone();
    v["test"]["tls"] = serde_json::json!({"insecure": false, "ca_file": null});
    cases.push((v, "ca_file"));
    for (v, field) in &cases {
        let e = match serde_json::from_value::<TestSpec>(v.clone()) {
            Ok(s) => panic!("{field}: null was taken: {s:?} from {v}"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(&format!("`{field}`")) && e.contains("null"),
            "{field}: {e} (from {v})"
        );
        // Left out: the same spec is taken (the case tests null, nothing else).
        let mut without = v.clone();
        strip_nulls(&mut without);
        serde_json::from_value::<TestSpec>(without.clone()).unwrap_or_else(|e| panic!("{without}: {e}"));
    }
    // A required field's null was always refused.
    let mut v = base(stream.clone());
    v["flows"] = serde_json::Value::Null;
    assert!(serde_json::from_value::<TestSpec>(v).is_err());
}

fn strip_nulls(v: &mut serde_json::Value) {
    if let Some(o) = v.as_object_mut() {
        o.retain(|_, x| !x.is_null());
        for x in o.values_mut() {
            strip_nulls(x);
        }
    }
}
