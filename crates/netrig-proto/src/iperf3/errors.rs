//! iperf3's error numbers (its i_errno) that cross the wire after
//! SERVER_ERROR, with iperf3's own words for them: a server netrig talks to
//! sends them, and netrig's agent sends them so that an iperf3 client
//! prints the message its users know.

pub const IEDURATION: i32 = 5;
pub const IENUMSTREAMS: i32 = 6;
pub const IEBLOCKSIZE: i32 = 7;
pub const IEBUFSIZE: i32 = 8;
pub const IEMSS: i32 = 10;
pub const IEOMIT: i32 = 12;
pub const IEUNIMP: i32 = 13;
pub const IEBURST: i32 = 15;
pub const IEENDCONDITIONS: i32 = 16;
pub const IENOSCTP: i32 = 18;
pub const IEUDPBLOCKSIZE: i32 = 20;
pub const IEBADTOS: i32 = 21;
pub const IEREVERSEBIDIR: i32 = 25;
pub const IETOTALRATE: i32 = 27;
pub const IEMAXSERVERTESTDURATIONEXCEEDED: i32 = 37;
pub const IERECVCOOKIE: i32 = 106;
pub const IECTRLCLOSE: i32 = 109;
pub const IEMESSAGE: i32 = 110;
pub const IERECVPARAMS: i32 = 114;
pub const IERECVRESULTS: i32 = 117;
pub const IECLIENTTERM: i32 = 119;
pub const IESERVERTERM: i32 = 120;
pub const IEACCESSDENIED: i32 = 121;
pub const IESETCONGESTION: i32 = 134;
pub const IEAUTHTEST: i32 = 142;
pub const IENOMSG: i32 = 144;
pub const IESERVERTESTDURATIONEXPIRED: i32 = 160;
pub const IESTREAMACCEPT: i32 = 204;
pub const IESTREAMREAD: i32 = 206;
pub const IESTREAMID: i32 = 208;

/// iperf3's text for an error number (its iperf_strerror, shortened where
/// it names iperf3's own compile-time limits), or the number itself.
pub fn describe(code: i32) -> String {
    let text = match code {
        IEDURATION => "test duration valid values are 0 to 86400 seconds",
        IENUMSTREAMS => "number of parallel streams too large (maximum = 128)",
        IEBLOCKSIZE => "block size too large (maximum = 1048576 bytes)",
        IEBUFSIZE => "socket buffer size too large (maximum = 536870912 bytes)",
        IEMSS => "TCP MSS too large (maximum = 32767 bytes)",
        IEOMIT => "bogus value for --omit",
        IEUNIMP => "an option you are trying to set is not implemented yet",
        IEBURST => "invalid burst count (maximum = 1000)",
        IEENDCONDITIONS => "only one test end condition (-t, -n, -k) may be specified",
        IENOSCTP => "no SCTP support available",
        IEUDPBLOCKSIZE => "block size invalid",
        IEBADTOS => "bad TOS value (must be between 0 and 255 inclusive)",
        IEREVERSEBIDIR => "cannot be both reverse and bidirectional",
        IETOTALRATE => "total required bandwidth is larger than server limit",
        IEMAXSERVERTESTDURATIONEXCEEDED => {
            "client's requested duration exceeds the server's maximum permitted limit"
        }
        IERECVCOOKIE => "unable to receive cookie at server",
        IECTRLCLOSE => "control socket has closed unexpectedly",
        IEMESSAGE => "received an unknown control message",
        IERECVPARAMS => "unable to receive parameters from client",
        IERECVRESULTS => "unable to receive results",
        IECLIENTTERM => "the client has terminated",
        IESERVERTERM => "the server has terminated",
        IEACCESSDENIED => "the server is busy running a test. try again later",
        IESETCONGESTION => {
            "unable to set TCP_CONGESTION: supplied congestion control algorithm not supported on this host"
        }
        IEAUTHTEST => "test authorization failed",
        IENOMSG => "idle timeout for receiving data",
        IESERVERTESTDURATIONEXPIRED => "server test duration expired",
        IESTREAMACCEPT => "unable to accept stream connection",
        IESTREAMREAD => "unable to read from stream socket",
        IESTREAMID => "stream has an invalid id",
        _ => return format!("iperf3 error {code}"),
    };
    format!("{text} (iperf3 error {code})")
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_errors_read_as_iperf3_words_and_others_by_number() {
        assert_eq!(
            super::describe(142),
            "test authorization failed (iperf3 error 142)"
        );
        assert_eq!(super::describe(9999), "iperf3 error 9999");
    }
}
