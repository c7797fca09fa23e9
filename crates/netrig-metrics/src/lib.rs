//! Measurements that are not the data path: machine-wide CPU accounting from
//! `/proc/stat`, `TCP_INFO` for a socket, kernel protocol counters from
//! `/proc/net/snmp` and `/proc/net/netstat`, and a description of the test
//! environment.
//!
//! The guiding rule is that every number reported must be true. Per-process
//! CPU accounting is "hopelessly inaccurate" for network work (netperf's
//! manual) because protocol processing is charged to softirq time on whatever
//! CPU happened to take the interrupt, so system CPU utilisation is measured
//! from per-CPU `/proc/stat` deltas over exactly the measured window
//! ([`CpuSnapshot::usage_since`]).
//!
//! Nothing in this crate panics on odd kernel output: parsers return
//! [`MetricsError`] instead, and counters that go backwards are handled with
//! saturating or wrapping arithmetic as documented on each function.
//!
//! Every public data type derives `Debug`, `Clone`, `serde::Serialize` and
//! `serde::Deserialize` so that the agent can send it to the client as JSON.
//! The one exception is [`MetricsError`], which wraps a `std::io::Error`.

pub mod counters;
pub mod cpu;
pub mod environment;
pub mod host;
pub mod latency;
pub mod one_way;
pub mod tcp_info;
pub mod udp_seq;
pub mod witness;

pub use counters::{
    parse_snmp, parse_snmp6, read_conntrack, read_kernel_counters, Conntrack, KernelCounters,
};
pub use cpu::{
    parse_proc_stat, per_packet_us, process_cpu_time, read_proc_stat, service_demand, thread_cpu_time,
    CpuSnapshot, CpuTicks, CpuUsage, ServiceDemand,
};
pub use environment::{collect, read_sysctl, sysctl_u64, Environment};
pub use latency::{LatencyRecorder, LatencySummary};
pub use one_way::OneWayRecorder;
pub use tcp_info::{tcp_info, TcpInfo};
pub use udp_seq::{Arrival, SeqInterval, SeqLive, SeqSummary, SeqTracker, Timing};
pub use witness::{
    counter_scope, interface_of, interfaces_of, read_interface, socket_payload, socket_queue,
    InterfaceCounters,
};

/// Errors from reading or parsing kernel files.
///
/// Both variants name the file involved so that a message shown to the user
/// says where the problem is.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file that could not be read, e.g. `/proc/stat`.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A file was read but its contents were not understood.
    #[error("cannot parse {path} line {line}: {what}")]
    Parse {
        /// The file whose contents were malformed, e.g. `/proc/stat`.
        path: String,
        /// 1-based line number of the problem; 0 when the problem is about
        /// the file as a whole (e.g. a required line is missing).
        line: usize,
        /// What was wrong.
        what: String,
    },
}

impl MetricsError {
    pub(crate) fn io(path: &str, source: std::io::Error) -> Self {
        MetricsError::Io {
            path: path.to_string(),
            source,
        }
    }

    pub(crate) fn parse(path: &str, line: usize, what: impl Into<String>) -> Self {
        MetricsError::Parse {
            path: path.to_string(),
            line,
            what: what.into(),
        }
    }
}

/// Reads a whole file into a string, mapping errors to [`MetricsError::Io`].
pub(crate) fn read_file(path: &str) -> Result<String, MetricsError> {
    std::fs::read_to_string(path).map_err(|e| MetricsError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that `parse` refuses each of `bad` with an error naming
    /// `path`, not a panic, and that the error for `at.0` names line `at.1`.
    pub(crate) fn assert_refuses<T: std::fmt::Debug>(
        parse: impl Fn(&str) -> Result<T, MetricsError>,
        path: &str,
        bad: &[&str],
        at: (&str, usize),
    ) {
        for text in bad {
            let e = parse(text);
            assert!(e.is_err(), "accepted {text:?}");
            assert!(e.unwrap_err().to_string().contains(path));
        }
        match parse(at.0) {
            Err(MetricsError::Parse { line, .. }) => assert_eq!(line, at.1),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn error_messages_name_the_file() {
        let e = MetricsError::io(
            "/proc/stat",
            std::io::Error::new(std::io::ErrorKind::NotFound, "gone"),
        );
        let s = e.to_string();
        assert!(s.contains("/proc/stat"), "{s}");
        assert!(s.contains("gone"), "{s}");
        assert!(std::error::Error::source(&e).is_some());

        let e = MetricsError::parse("/proc/net/snmp", 7, "bad number \"x\"");
        let s = e.to_string();
        assert!(s.contains("/proc/net/snmp"), "{s}");
        assert!(s.contains("line 7"), "{s}");
        assert!(s.contains("bad number"), "{s}");
    }
}
