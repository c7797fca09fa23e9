//! The sampler on this host: a busy loop of this process and a loopback TCP transfer sampled
//! for half a second. Where the host refuses perf_event_open (perf_event_paranoid without root
//! or CAP_PERFMON, kptr_restrict, no perf events), the test says `skipped: ...` with the
//! sampler's own reason and returns: a property of the host that no package changes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use netrig_profile::{Config, Group, Ours, ProfileError, Sampler, Verdict};

/// Spins until told to stop, with no call inside the inner loop, so that its samples' leaf
/// is this function even in a build without optimization.
#[inline(never)]
fn spin_here(stop: &AtomicBool) -> u64 {
    let mut x: u64 = 88172645463325252;
    while !stop.load(Ordering::Relaxed) {
        // A counted loop without `Range`: an unoptimised build calls core's range iterator for
        // each step (rustc 1.95 does not inline it at opt-level 0), and the samples would end there.
        let mut i = 0;
        while i < 10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            i += 1;
        }
    }
    x
}

/// A listener on loopback below 32768 (the project's rule for tests), trying a few ports.
fn listener() -> TcpListener {
    let base = 21_000 + (std::process::id() % 8_000) as u16;
    (0..50)
        .find_map(|i| TcpListener::bind(("127.0.0.1", base + i * 7)).ok())
        .expect("a free loopback port in 21000-29400")
}

/// Sends on loopback until `stop`, every write bounded by a timeout; the receiver reads to EOF.
fn transfer(stop: Arc<AtomicBool>) -> (std::thread::JoinHandle<u64>, std::thread::JoinHandle<u64>) {
    let l = listener();
    let addr = l.local_addr().unwrap();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 128 * 1024];
        let mut n = 0u64;
        while let Ok(k) = s.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        n
    });
    let tx = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let buf = vec![7u8; 128 * 1024];
        let mut n = 0u64;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            s.write_all(&buf).unwrap();
            n += buf.len() as u64;
        }
        n
    });
    (tx, rx)
}

#[test]
fn samples_a_busy_loop_and_a_loopback_transfer() {
    let sampler = match Sampler::new(Config::default()) {
        Ok(s) => s,
        // The host's refusals skip; any other failure is the sampler's and fails.
        Err(
            e @ (ProfileError::NotAllowed { .. }
            | ProfileError::KernelAddressesHidden { .. }
            | ProfileError::Unsupported(_)),
        ) => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tid_tx, tid_rx) = mpsc::channel();
    let flag = stop.clone();
    let spinner = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
        spin_here(&flag)
    });
    let busy_tid = tid_rx.recv().unwrap();
    let (tx, rx) = transfer(stop.clone());
    std::thread::sleep(Duration::from_millis(50));

    let running = sampler.start();
    std::thread::sleep(Duration::from_millis(500));
    let profile = running
        .stop(&Ours {
            pids: Vec::new(),
            tids: vec![busy_tid],
        })
        .unwrap();

    stop.store(true, Ordering::Relaxed);
    std::hint::black_box(spinner.join().unwrap());
    let sent = tx.join().unwrap();
    assert!(rx.join().unwrap() > 0 && sent > 0, "the transfer moved data");

    eprintln!(
        "window {:?}, {} CPUs, {} samples, {} lost, {} dropped, {} stacks, witness {:?}",
        profile.window,
        profile.cpus,
        profile.samples,
        profile.lost_samples,
        profile.dropped_samples,
        profile.stacks.len(),
        profile.witness()
    );
    eprintln!("split {:?}", profile.split());
    for (g, c) in profile.groups() {
        eprintln!("  {:>12} {:>6} samples", g.name(), c.samples);
    }
    for f in profile.top_functions(15) {
        eprintln!("  {:>6} {:>6} {}", f.inclusive_samples, f.self_samples, f.name);
    }

    // The busy thread: about 500 samples at 999 Hz if it had a CPU to itself; on a shared
    // machine, at least a tenth of that.
    let split = profile.split();
    let ours = split.this_test_process.samples + split.this_test_softirq.samples;
    assert!(ours >= 50, "samples on the busy thread: {ours}");
    let named = profile
        .stacks
        .iter()
        // The leaf, or the caller of the leaf (`AtomicBool::load`, a call in an unoptimised build).
        .filter(|s| s.this_test && s.frames.iter().rev().take(2).any(|f| f.ends_with("spin_here")))
        .map(|s| s.samples)
        .sum::<u64>();
    assert!(
        named * 2 >= ours,
        "most of the busy thread's samples end in spin_here: {named} of {ours}"
    );

    // The transfer: TCP's send path and the copies, named from kallsyms.
    let top = profile.top_functions(usize::MAX);
    assert!(
        top.iter()
            .any(|f| f.name == "tcp_sendmsg" || f.name == "tcp_recvmsg"),
        "tcp_sendmsg or tcp_recvmsg among the functions"
    );
    let groups = profile.groups();
    let of = |g: Group| groups.iter().find(|(x, _)| *x == g).map_or(0, |(_, c)| c.samples);
    assert!(of(Group::Tcp) > 0 && of(Group::MemoryCopy) > 0, "{groups:?}");

    // Names only: no frame is an address.
    let address =
        |f: &str| f.starts_with("0x") || (f.len() == 16 && f.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(!profile.stacks.iter().flat_map(|s| &s.frames).any(|f| address(f)));

    // The witness: every CPU sampled at 999 Hz, the non-idle part against /proc/stat, judged
    // within 5 % or what /proc/stat resolves over half a second (its ticks are 10 ms), the
    // wider. The ratio keeps a generous band of its own as well.
    let w = profile.witness().expect("/proc/stat was read");
    let r = w.ratio.expect("busy time was counted");
    assert!(
        (0.6..=1.4).contains(&r),
        "sampled/counted busy time {r:.3}: {w:?}"
    );
    assert_ne!(w.verdict, Verdict::Disagrees, "{w:?}");

    // The kernel's counts over the same window: loopback's receive path runs in NET_RX and
    // softnet counts its packets.
    let rx = profile.net.softirq_totals().expect("/proc/softirqs was read");
    let softnet = profile
        .net
        .softnet_totals()
        .expect("/proc/net/softnet_stat was read");
    eprintln!("softirqs {rx:?}, softnet {softnet:?}");
    assert!(rx.net_rx > 0 && softnet.processed > 0, "{:?}", profile.net);
    assert!(profile.lost_samples == 0 || profile.lost_samples * 100 < profile.samples);
}
