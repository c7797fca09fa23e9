//! The test's parameters, which the client sends after the server's
//! PARAM_EXCHANGE: one JSON object (iperf_api.c's send_parameters and
//! get_parameters). Keys iperf3 leaves out when an option is off are
//! `false`/`None` here; keys netrig does not know are ignored, as iperf3
//! ignores them.

use super::errors::*;
use super::num::{self, bounded, flag, number_flag};
use super::{Iperf3Error, MAX_PARAMS_JSON, MAX_STREAMS};
use serde_json::{json, Map, Value};

/// iperf3's longest test (`-t`, its MAX_TIME), in seconds.
pub const MAX_TIME: u32 = 86_400;
/// iperf3's longest omitted start (`-O`, MAX_OMIT_TIME), in seconds.
pub const MAX_OMIT: u32 = 600;
/// iperf3's largest TCP block (`-l`, MAX_BLOCKSIZE).
pub const MAX_TCP_BLOCK: u32 = 1 << 20;
/// iperf3's largest UDP datagram (`-l`, MAX_UDP_BLOCKSIZE).
pub const MAX_UDP_BLOCK: u32 = 65_535 - 8 - 20;
/// iperf3's largest socket buffer (`-w`, MAX_TCP_BUFFER).
pub const MAX_WINDOW: u32 = 512 << 20;
/// iperf3's largest burst (`-b RATE/BURST`, MAX_BURST).
pub const MAX_BURST: u32 = 1000;
/// iperf3's largest MSS (`-M`, MAX_MSS).
pub const MAX_MSS: u32 = 32 * 1024 - 1;
/// iperf3's default TCP block (`-l`, DEFAULT_TCP_BLKSIZE).
pub const DEFAULT_TCP_BLOCK: u32 = 128 * 1024;
/// iperf3's default UDP datagram where the client names none.
pub const DEFAULT_UDP_BLOCK: u32 = 1460;

/// Which way a test's data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The client sends (iperf3's default).
    ClientSends,
    /// The server sends (`-R`).
    ServerSends,
    /// Both send, on separate streams (`--bidir`).
    Both,
}

/// A client's parameters (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Params {
    pub tcp: bool,
    pub udp: bool,
    pub sctp: bool,
    /// `-O`: seconds at the start not counted.
    pub omit: u32,
    /// `-t`: seconds; 0 with `-n`/`-k`, or for a test without end.
    pub time: u32,
    /// `-n`: bytes to send.
    pub num: u64,
    /// `-k`: blocks to send.
    pub blockcount: u64,
    pub mss: Option<u32>,
    pub nodelay: bool,
    /// `-P`.
    pub parallel: u32,
    pub reverse: bool,
    pub bidirectional: bool,
    pub mptcp: bool,
    /// `-w`: socket buffer, bytes.
    pub window: Option<u32>,
    /// `-l`: block (TCP) or datagram (UDP) size, bytes.
    pub len: Option<u32>,
    /// `-b`: bits/s per stream.
    pub bandwidth: Option<u64>,
    /// `--fq-rate`: bits/s per stream.
    pub fqrate: Option<u64>,
    pub pacing_timer: Option<u32>,
    pub burst: Option<u32>,
    /// `-S`.
    pub tos: Option<u32>,
    pub flowlabel: Option<u32>,
    pub title: Option<String>,
    pub extra_data: Option<String>,
    /// `-C`.
    pub congestion: Option<String>,
    pub congestion_used: Option<String>,
    pub get_server_output: bool,
    pub udp_counters_64bit: bool,
    pub repeating_payload: bool,
    /// `-Z`.
    pub zerocopy: bool,
    pub dont_fragment: bool,
    /// iperf3's RSA authentication token (a client built with OpenSSL and
    /// given `--username`).
    pub authtoken: Option<String>,
    pub skip_rx_copy: bool,
    pub client_version: Option<String>,
    pub server_affinity: Option<i32>,
}

impl Params {
    /// Reads a client's parameters. Numbers are bounded to their field's
    /// type; [`Params::check`] applies iperf3's own limits.
    pub fn decode(json: &[u8]) -> Result<Params, Iperf3Error> {
        if json.len() > MAX_PARAMS_JSON {
            return Err(Iperf3Error::TooLong {
                what: "iperf3 parameters",
                len: json.len() as u64,
                max: MAX_PARAMS_JSON,
                whose: "iperf3's",
            });
        }
        let o = num::object(json, "the iperf3 parameters")?;
        let u32_of = |key, option, meaning| {
            bounded(&o, key, option, meaning, u32::MAX as u64, IEUNIMP).map(|v| v.map(|v| v as u32))
        };
        let u64_of = |key, option, meaning| bounded(&o, key, option, meaning, u64::MAX, IEUNIMP);
        // iperf3's client sends these only when set, and 0 is its "unset".
        let some_u32 = |key, option, meaning| u32_of(key, option, meaning).map(|v| v.filter(|v| *v != 0));
        let some_u64 = |key, option, meaning| u64_of(key, option, meaning).map(|v| v.filter(|v| *v != 0));
        let text = |key| num::string(&o, key, MAX_PARAMS_JSON);
        Ok(Params {
            tcp: flag(&o, "tcp"),
            udp: flag(&o, "udp"),
            sctp: flag(&o, "sctp"),
            omit: u32_of("omit", "-O", "seconds omitted")?.unwrap_or(0),
            time: u32_of("time", "-t", "seconds")?.unwrap_or(0),
            num: u64_of("num", "-n", "bytes")?.unwrap_or(0),
            blockcount: u64_of("blockcount", "-k", "blocks")?.unwrap_or(0),
            mss: some_u32("MSS", "-M", "maximum segment size")?,
            nodelay: flag(&o, "nodelay"),
            parallel: u32_of("parallel", "-P", "parallel streams")?.unwrap_or(1),
            reverse: flag(&o, "reverse"),
            bidirectional: flag(&o, "bidirectional"),
            mptcp: flag(&o, "mptcp"),
            window: some_u32("window", "-w", "socket buffer bytes")?,
            len: some_u32("len", "-l", "block bytes")?,
            bandwidth: some_u64("bandwidth", "-b", "bits/s per stream")?,
            fqrate: some_u64("fqrate", "--fq-rate", "bits/s per stream")?,
            pacing_timer: some_u32("pacing_timer", "--pacing-timer", "microseconds")?,
            burst: some_u32("burst", "-b RATE/BURST", "packets per burst")?,
            tos: some_u32("TOS", "-S", "type of service")?,
            flowlabel: some_u32("flowlabel", "-L", "flow label")?,
            title: text("title")?,
            extra_data: text("extra_data")?,
            congestion: text("congestion")?,
            congestion_used: text("congestion_used")?,
            get_server_output: number_flag(&o, "get_server_output"),
            udp_counters_64bit: number_flag(&o, "udp_counters_64bit"),
            repeating_payload: number_flag(&o, "repeating_payload"),
            zerocopy: num::int(&o, "zerocopy").is_some_and(|z| z != 0),
            dont_fragment: num::int(&o, "dont_fragment").is_some_and(|z| z != 0),
            authtoken: text("authtoken")?,
            skip_rx_copy: num::int(&o, "skip_rx_copy").is_some_and(|z| z != 0),
            client_version: text("client_version")?,
            server_affinity: num::int(&o, "server_affinity").map(|a| a.clamp(-1, i32::MAX as i64) as i32),
        })
    }

    /// The parameters as iperf3 3.21's client sends them (keys of options
    /// that are off left out; `client_version` as the caller sets it).
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Map::new();
        let mut put = |k: &str, v: Value| {
            o.insert(k.to_string(), v);
        };
        // The protocol as the caller set it: a client sends one of them;
        // a server that reads none runs TCP.
        for (k, on) in [("tcp", self.tcp), ("udp", self.udp), ("sctp", self.sctp)] {
            if on {
                put(k, json!(true));
            }
        }
        put("omit", json!(self.omit));
        if let Some(a) = self.server_affinity {
            put("server_affinity", json!(a));
        }
        put("time", json!(self.time));
        put("num", json!(self.num));
        put("blockcount", json!(self.blockcount));
        let opt_u = |v: Option<u64>| v.filter(|v| *v != 0).map(|v| json!(v));
        let flags = [
            ("nodelay", self.nodelay),
            ("reverse", self.reverse),
            ("bidirectional", self.bidirectional),
            ("mptcp", self.mptcp),
        ];
        let numbers = [
            ("MSS", self.mss.map(u64::from)),
            ("window", self.window.map(u64::from)),
            ("len", self.len.map(u64::from)),
            ("bandwidth", self.bandwidth),
            ("fqrate", self.fqrate),
            ("pacing_timer", self.pacing_timer.map(u64::from)),
            ("burst", self.burst.map(u64::from)),
            ("TOS", self.tos.map(u64::from)),
            ("flowlabel", self.flowlabel.map(u64::from)),
        ];
        put("parallel", json!(self.parallel));
        for (k, on) in flags {
            if on {
                put(k, json!(true));
            }
        }
        for (k, v) in numbers {
            if let Some(v) = opt_u(v) {
                put(k, v);
            }
        }
        let strings = [
            ("title", &self.title),
            ("extra_data", &self.extra_data),
            ("congestion", &self.congestion),
            ("congestion_used", &self.congestion_used),
            ("authtoken", &self.authtoken),
        ];
        for (k, v) in strings {
            if let Some(v) = v {
                put(k, json!(v));
            }
        }
        let ones = [
            ("get_server_output", self.get_server_output),
            ("udp_counters_64bit", self.udp_counters_64bit),
            ("repeating_payload", self.repeating_payload),
            ("zerocopy", self.zerocopy),
            ("dont_fragment", self.dont_fragment),
            ("skip_rx_copy", self.skip_rx_copy),
        ];
        for (k, on) in ones {
            if on {
                put(k, json!(1));
            }
        }
        if let Some(v) = &self.client_version {
            put("client_version", json!(v));
        }
        serde_json::to_vec(&Value::Object(o)).expect("a JSON object always serialises")
    }

    /// Which way the data goes.
    pub fn direction(&self) -> Direction {
        if self.bidirectional {
            Direction::Both
        } else if self.reverse {
            Direction::ServerSends
        } else {
            Direction::ClientSends
        }
    }

    /// The block (TCP) or datagram (UDP) size the test uses.
    pub fn block_len(&self) -> u32 {
        match self.len.filter(|l| *l > 0) {
            Some(l) => l,
            None if self.udp => DEFAULT_UDP_BLOCK,
            None => DEFAULT_TCP_BLOCK,
        }
    }

    /// The streams the test opens: `-P`, twice over with `--bidir`.
    pub fn streams(&self) -> usize {
        self.parallel as usize * if self.bidirectional { 2 } else { 1 }
    }

    /// Applies iperf3's own limits (its iperf.h), as an iperf3 server
    /// would: the error carries the iperf3 error number to send back.
    pub fn check(&self) -> Result<(), Iperf3Error> {
        if self.sctp {
            return Err(Iperf3Error::Unsupported {
                what: "SCTP (--sctp)".into(),
                why: "netrig measures TCP, MPTCP and UDP",
                code: IENOSCTP,
            });
        }
        let out = |option, meaning, value: u64, limit: String, code| Iperf3Error::BadValue {
            option,
            meaning,
            value: value.to_string(),
            limit,
            code,
        };
        if self.time > MAX_TIME {
            return Err(out(
                "-t",
                "seconds",
                self.time.into(),
                format!("0 to {MAX_TIME}"),
                IEDURATION,
            ));
        }
        if self.omit > MAX_OMIT {
            return Err(out(
                "-O",
                "seconds omitted",
                self.omit.into(),
                format!("0 to {MAX_OMIT}"),
                IEOMIT,
            ));
        }
        if self.parallel == 0 || self.parallel as usize > MAX_STREAMS {
            let limit = format!("1 to {MAX_STREAMS}");
            return Err(out(
                "-P",
                "parallel streams",
                self.parallel.into(),
                limit,
                IENUMSTREAMS,
            ));
        }
        let (max_len, code, header) = if self.udp {
            (
                MAX_UDP_BLOCK,
                IEUDPBLOCKSIZE,
                super::UdpHeader::len(self.udp_counters_64bit) as u32,
            )
        } else {
            (MAX_TCP_BLOCK, IEBLOCKSIZE, 1)
        };
        let len = self.block_len();
        if len < header || len > max_len {
            return Err(out(
                "-l",
                "block bytes",
                len.into(),
                format!("{header} to {max_len}"),
                code,
            ));
        }
        let limits = [
            ("-w", "socket buffer bytes", self.window, MAX_WINDOW, IEBUFSIZE),
            (
                "-b RATE/BURST",
                "packets per burst",
                self.burst,
                MAX_BURST,
                IEBURST,
            ),
            ("-M", "maximum segment size", self.mss, MAX_MSS, IEMSS),
            ("-S", "type of service", self.tos, 255, IEBADTOS),
        ];
        for (option, meaning, v, max, code) in limits {
            if let Some(v) = v.filter(|v| *v > max) {
                return Err(out(option, meaning, v.into(), format!("0 to {max}"), code));
            }
        }
        if self.reverse && self.bidirectional {
            return Err(Iperf3Error::Unsupported {
                what: "-R with --bidir".into(),
                why: "a test is either reversed or bidirectional",
                code: IEREVERSEBIDIR,
            });
        }
        let ends = [self.time as u64, self.num, self.blockcount];
        if ends.iter().filter(|v| **v > 0).count() > 1 {
            return Err(Iperf3Error::Unsupported {
                what: "more than one of -t, -n and -k".into(),
                why: "a test has one end condition",
                code: IEENDCONDITIONS,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::recorded;
    use super::*;

    #[test]
    fn iperf3_3_21_and_3_12_parameters_are_read() {
        let p = Params::decode(recorded::PARAMS_TCP).unwrap();
        assert!(p.tcp && !p.udp && p.get_server_output);
        assert_eq!((p.time, p.parallel, p.len, p.omit), (1, 2, Some(131_072), 0));
        assert_eq!(p.client_version.as_deref(), Some("3.21"));
        assert_eq!(p.direction(), Direction::ClientSends);
        p.check().unwrap();
        let u = Params::decode(recorded::PARAMS_UDP_REVERSE).unwrap();
        assert!(u.udp && u.reverse && !u.udp_counters_64bit);
        assert_eq!((u.bandwidth, u.block_len()), (Some(1_000_000), 32_768));
        assert_eq!(u.direction(), Direction::ServerSends);
        u.check().unwrap();
        let old = Params::decode(recorded::PARAMS_312_TCP_REVERSE).unwrap();
        assert_eq!(old.client_version.as_deref(), Some("3.12"));
        assert_eq!(old.streams(), 2);
    }

    #[test]
    fn what_netrig_sends_reads_back_the_same() {
        let p = Params {
            udp: true,
            time: 5,
            parallel: 4,
            bidirectional: true,
            len: Some(1200),
            bandwidth: Some(10_000_000),
            udp_counters_64bit: true,
            get_server_output: true,
            congestion: Some("cubic".into()),
            tos: Some(0x10),
            client_version: Some("3.21".into()),
            ..Params::default()
        };
        assert_eq!(Params::decode(&p.encode()).unwrap(), p);
        assert_eq!(p.streams(), 8);
        let recorded = Params::decode(recorded::PARAMS_TCP).unwrap();
        assert_eq!(Params::decode(&recorded.encode()).unwrap(), recorded);
    }
}
