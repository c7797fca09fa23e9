//! syn-flood: netrig's SYN flood generator as a test kind with one end, so a plan's group can
//! run it beside a probe on one time axis. It runs only inside a lab host towards another host
//! of the same lab (netrig-lab's overload::scope); an agent refuses it, as every one-ended kind.

use super::{Exchange, KindRules, Offered, Transport};
use crate::spec::{out_of_range, Bounds, Direction, SpecError};
use serde::{Deserialize, Serialize};

/// The highest rate, SYNs per second (netrig-lab's flood has the same bound).
pub const MAX_SYN_FLOOD_RATE: u32 = 200_000;
/// The longest flood, seconds.
pub const MAX_SYN_FLOOD_S: f64 = 60.0;

/// syn-flood's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynFloodSpec {
    /// SYNs per second (`--rate`).
    pub rate_pps: u32,
}

impl Default for SynFloodSpec {
    fn default() -> Self {
        SynFloodSpec { rate_pps: 20_000 }
    }
}

impl KindRules for SynFloodSpec {
    fn directions(&self) -> &'static [Direction] {
        &[Direction::Tx]
    }
    fn transport(&self) -> Transport {
        Transport::Tcp
    }
    fn exchange(&self) -> Exchange {
        Exchange::Transactions
    }
    fn call_sizes(&self) -> (u32, u32) {
        (1, 1)
    }
    fn check(&self, _: &Bounds<'_>) -> Result<(), SpecError> {
        if self.rate_pps == 0 || self.rate_pps > MAX_SYN_FLOOD_RATE {
            return Err(out_of_range(
                "--rate",
                self.rate_pps,
                format!("1..={MAX_SYN_FLOOD_RATE} SYNs/s"),
            ));
        }
        Ok(())
    }
    fn worker_buffer_bytes(&self) -> u64 {
        0
    }
    /// Its rate; no buffers.
    fn bounds(&self) -> super::KindBounds<'_> {
        super::KindBounds {
            ranges: vec![(
                "--rate",
                f64::from(self.rate_pps),
                1.0,
                f64::from(MAX_SYN_FLOOD_RATE),
            )],
            ..Default::default()
        }
    }
    fn offered(&self) -> Offered {
        Offered::SelfClocked
    }
}
