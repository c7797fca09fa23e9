//! What a lab's path element (netrig's user-space forwarder, docs/LAB.md) did over one run,
//! beside the kernel counters: the difference of its counter files read before and after the run.

use serde::{Deserialize, Serialize};

/// One direction of one element over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathElementCounts {
    /// The lab link the element sits on, and the direction (sending host → receiving host).
    pub link: String,
    pub from: String,
    pub to: String,
    /// The window: when the element wrote the two counter files read (seconds since the Unix
    /// epoch). It writes them every 100 ms, so the window holds the run and up to 100 ms either
    /// side of it.
    pub window_start_unix_s: f64,
    pub window_end_unix_s: f64,
    /// Frames read from the sender's side.
    pub received: u64,
    /// Frames sent to the receiver's side (extra copies included).
    pub forwarded: u64,
    /// Frames dropped by the loss model.
    pub dropped: u64,
    /// Frames held in the delay line.
    pub delayed: u64,
    /// Frames sent after a frame that arrived later than them.
    pub reordered: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Frames the kernel refused to send.
    pub send_errors: u64,
    /// Frames dropped at the delay line's memory bound.
    pub overflow: u64,
    /// Frames the kernel dropped before the element read them (the element behind).
    pub rx_drops: u64,
    /// The same for the UDP datagrams among the frames.
    pub udp: PathElementUdp,
    /// Pure TCP acknowledgements among the frames received (ACK set, no data), and those that
    /// carry a SACK option.
    #[serde(default)]
    pub tcp_acks: u64,
    #[serde(default)]
    pub tcp_sack_acks: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathElementUdp {
    pub received: u64,
    pub dropped: u64,
    pub reordered: u64,
    pub duplicated: u64,
}

impl PathElementCounts {
    /// One line as the tables print it.
    pub fn line(&self) -> String {
        format!(
            "path element {} → {} on {}: received {}, forwarded {}, dropped {}, delayed {}, reordered {}, duplicated {}, send errors {}, overflow {}, dropped unread {}; UDP: received {}, dropped {}, reordered {}, duplicated {}; TCP pure acknowledgements {} ({} with SACK) (frames over {:.2} s: the element's counter files, written every 100 ms)",
            self.from,
            self.to,
            self.link,
            self.received,
            self.forwarded,
            self.dropped,
            self.delayed,
            self.reordered,
            self.duplicated,
            self.send_errors,
            self.overflow,
            self.rx_drops,
            self.udp.received,
            self.udp.dropped,
            self.udp.reordered,
            self.udp.duplicated,
            self.tcp_acks,
            self.tcp_sack_acks,
            self.window_end_unix_s - self.window_start_unix_s
        )
    }
}
