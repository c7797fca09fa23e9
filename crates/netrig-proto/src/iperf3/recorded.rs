//! An iperf3 3.21 test on loopback (`iperf3 -c -t 1 -P 2 --get-server-output`
//! through a recording proxy), a UDP `-R` test's and Debian's iperf3 3.12's
//! parameters: the bytes as they crossed the control connection.

pub const COOKIE: &[u8; 37] = include_bytes!("recorded/cookie.bin");
pub const PARAMS_TCP: &[u8] = include_bytes!("recorded/params-3.21-tcp.json");
pub const PARAMS_UDP_REVERSE: &[u8] = include_bytes!("recorded/params-3.21-udp-reverse.json");
pub const PARAMS_312_TCP_REVERSE: &[u8] = include_bytes!("recorded/params-3.12-tcp-reverse.json");
pub const RESULTS_CLIENT: &[u8] = include_bytes!("recorded/results-3.21-client.json");
pub const RESULTS_SERVER: &[u8] = include_bytes!("recorded/results-3.21-server.json");
