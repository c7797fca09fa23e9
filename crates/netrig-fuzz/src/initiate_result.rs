//! What an asker (`netrig mesh`) reads of an agent's answer to `initiate`: the frame's JSON as
//! `AgentMsg::from_slice` reads it, and an `initiate_done`'s result as a netrig result, then its
//! figures as the mesh's matrix takes them (`netrig_fleet::orchestrate::{read_result, fill}`).
//!
//! Invariants: no panic (sums saturate); a cell's figures are the result's own (throughput,
//! transactions/s, the latency percentiles).

use netrig_fleet::matrix::MeshCell;
use netrig_fleet::orchestrate::{fill, read_result};
use netrig_proto::AgentMsg;

pub fn run(data: &[u8]) {
    let Ok(AgentMsg::InitiateDone { result }) = AgentMsg::from_slice(data) else {
        return;
    };
    let Ok(r) = read_result(&result) else {
        return;
    };
    let mut cell = MeshCell::new(0, 1, 0);
    fill(&mut cell, &r);
    assert_eq!(
        cell.throughput_bps.map(f64::to_bits),
        Some(r.summary.throughput_bps.to_bits())
    );
    assert_eq!(
        cell.transactions_per_s.map(f64::to_bits),
        r.summary.transactions_per_s.map(f64::to_bits)
    );
    assert_eq!(
        cell.latency_p99_us.map(f64::to_bits),
        r.summary.latency_us.as_ref().map(|l| l.p99.to_bits())
    );
}
