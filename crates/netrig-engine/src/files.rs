//! The open-file limit (RLIMIT_NOFILE) against the sockets a test needs:
//! checked before anything connects, so that `-P 25000` on a host that caps
//! descriptors at 20,000 is told so at once, naming the limit, instead of
//! failing part-way with "Too many open files".

use netrig_proto::TestSpec;

/// Descriptors kept free beyond a test's sockets: the control connection,
/// the listener, log files, /proc readings, epoll and eventfd descriptors.
pub const RESERVE: u64 = 16;

/// The sockets one end of `spec` has open at most: a socket per flow and
/// direction, or for a connection per transaction, up to its in-flight count
/// per flow.
pub fn sockets_needed(spec: &TestSpec) -> u64 {
    match spec.connections() {
        0 => u64::from(spec.flows)
            .saturating_mul(spec.directions().len() as u64)
            .saturating_mul(u64::from(spec.rules().in_flight())),
        n => n,
    }
}

/// This process's open-file limit (soft) and how many descriptors it has open.
pub fn open_files() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some((lim.rlim_cur, open))
}

/// Whether `sockets` more descriptors fit under the open-file limit, with
/// [`RESERVE`] to spare; if not, why, naming the limit and how to raise it.
/// `what` says which end ("this client", "the agent's host").
pub fn check_open_files(sockets: u64, what: &str) -> Result<(), String> {
    let Some((limit, open)) = open_files() else {
        return Ok(());
    };
    if open.saturating_add(sockets).saturating_add(RESERVE) <= limit {
        return Ok(());
    }
    let room = limit.saturating_sub(open).saturating_sub(RESERVE);
    Err(format!(
        "the test needs {sockets} sockets on {what} and its open-file limit (RLIMIT_NOFILE) is {limit}, with \
         {open} open and {RESERVE} kept free: room for {room}. Raise it (`ulimit -n`, LimitNOFILE= for a \
         systemd service; above the hard limit only root or CAP_SYS_RESOURCE can), or ask for fewer flows (-P)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_beyond_the_open_file_limit_is_told_so_naming_it() {
        let (limit, _) = open_files().expect("Linux has /proc/self/fd");
        assert!(check_open_files(10, "this end").is_ok());
        let e = check_open_files(limit, "this end").unwrap_err();
        assert!(
            e.contains("RLIMIT_NOFILE") && e.contains(&format!("is {limit}")) && e.contains("ulimit -n"),
            "{e}"
        );
    }
}
