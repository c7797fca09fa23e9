//! One end's run of a test: spreads the flows over workers, samples their
//! counters on the measurement schedule and turns the samples into the
//! measured window and interim reports.
//!
//! Schedule, on this end's clock from `start` (the moment this end began):
//! with `-l`, the window is `[omit, length]`; interim samples every `-i`
//! seconds from `omit`, the last one cut short at `length`. With `-n` the
//! window runs from `start` until the flow is done (last byte written by a
//! sender, end of file seen by a receiver).
//!
//! Most tests keep one connection per flow for the whole run ([`Flow`]). A
//! connection-per-transaction test (tcp-crr) has flows without a socket of
//! their own ([`FlowSlot`]): they exist, with their counters, from the start,
//! so the schedule samples them like any other; their connections are opened
//! by this end's workers, or arrive from the peer through an intake that the
//! runner deals out to the workers ([`SideFlows::Transient`]).

use crate::intake::WorkerIntake;
use crate::witness::{Witness, WitnessFlow, WitnessMark};
use crate::workload::{TransientWorkload, WorkerControl, Workload};
use crate::IntervalLatencies;
use crate::{
    EngineError, FirstConnection, Flow, FlowCounters, FlowEnd, FlowSlot, ScheduleStats, TransientEnd,
    WorkerEnd,
};
use netrig_metrics::{CpuSnapshot, SeqInterval, SeqLive, TcpInfo};
use netrig_metrics::{LatencyRecorder, LatencySummary};
use netrig_proto::report::{measure, ScheduleReport};
use netrig_proto::report::{BufPair, IntervalSample, KindCounts, Role, WorkerCpu};
use netrig_proto::spec::{Exchange, Limit, Transport};
use netrig_proto::Direction;
use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When and how long this end measures.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// This end's time zero.
    pub start: Instant,
    pub limit: Limit,
    pub omit: Duration,
    pub interval: Option<Duration>,
    /// Worker threads (at most one per flow).
    pub workers: usize,
    /// How long receivers drain after the window closes.
    pub drain: Duration,
    /// In byte-count mode: give up when nothing moves for this long.
    pub stall_timeout: Duration,
    /// Read /proc/stat at the window's first and last sample.
    pub measure_cpu: bool,
    /// The test's id, carried in every UDP datagram.
    pub test_id: u64,
    /// Pin worker i to `cpus[i % len]` (`--cpus`, or the spec's
    /// `remote_cpus` on the agent); `None`: wherever the scheduler likes.
    pub cpus: Option<Vec<u32>>,
    /// The option that set `cpus`, for messages.
    pub cpus_option: &'static str,
    /// The most payload bits/s this end sends, all its workers together
    /// (the agent's `--max-rate`); `None`: no cap (the client's end).
    pub send_cap_bps: Option<u64>,
    /// An instant of this end no later than the other end's time zero
    /// (the agent: when it sent `data_ready`), from which receivers count
    /// one-way delay ([`netrig_proto::clock`]); `None`: `start` (the
    /// client's zero precedes the agent's).
    pub clock_ref: Option<Instant>,
    /// The test's transport: the witness keeps its own counters.
    pub transport: Transport,
    /// Told when the window opens and closes (the client's `--profile`).
    pub watch: crate::window_watch::WindowWatch,
}

impl RunPlan {
    /// The plan both ends follow for `spec`, from `start` (this end's time
    /// zero): the spec's length or byte count, omit, interval and workers (the
    /// number of CPUs unless `-T`), a 10 s drain and a 30 s stall bound.
    pub fn for_spec(spec: &netrig_proto::TestSpec, start: Instant, test_id: u64) -> RunPlan {
        RunPlan {
            start,
            limit: spec.limit,
            omit: Duration::from_secs_f64(spec.omit_s),
            interval: spec.interval_s.map(Duration::from_secs_f64),
            workers: spec
                .workers
                .map(|w| w as usize)
                .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
            drain: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(30),
            measure_cpu: spec.measure_cpu,
            test_id,
            cpus: None,
            cpus_option: "--cpus",
            send_cap_bps: None,
            clock_ref: None,
            transport: spec.rules().transport(),
            watch: Default::default(),
        }
    }
}

/// Lets another thread abort a run (the agent when the client goes away, the
/// client on Ctrl-C).
#[derive(Debug, Default)]
pub struct RunControl {
    stop: Arc<AtomicBool>,
    abort: Mutex<Option<String>>,
    /// Set with `abort`: workers stop at once, without draining.
    aborted: Arc<AtomicBool>,
    /// Set by `finish`: a timed run's window closes now, as at its end.
    finishing: AtomicBool,
    /// Set by `expect_finish`: the sampler looks for `finish` every
    /// [`FINISH_POLL`] rather than every 50 ms.
    finishable: AtomicBool,
}

/// How soon a run that expects `finish` sees it: its window closes within
/// this of the call (the peer's end is then the window's, to a few ms).
const FINISH_POLL: Duration = Duration::from_millis(2);

impl RunControl {
    pub fn new() -> Arc<Self> {
        Arc::new(RunControl::default())
    }

    /// Stops the run; it returns `EngineError::Aborted(reason)`.
    pub fn abort(&self, reason: impl Into<String>) {
        if let Ok(mut a) = self.abort.lock() {
            a.get_or_insert(reason.into());
        }
        self.aborted.store(true, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Ends a timed run's window now, gracefully, as if its time were up:
    /// the window closes, senders finish and receivers drain, and the run
    /// returns its figures. For a run whose end the peer decides (an iperf3
    /// client's TEST_END): its plan's length is then only a bound. A byte
    /// count's run ends when its flows do, and is not affected.
    pub fn finish(&self) {
        self.finishing.store(true, Ordering::Relaxed);
    }

    /// Says that this run's end will come by [`RunControl::finish`]: the
    /// sampler then sees it within [`FINISH_POLL`] (a wake-up of its thread
    /// that often, not of the workers'), not within its usual 50 ms.
    pub fn expect_finish(&self) {
        self.finishable.store(true, Ordering::Relaxed);
    }

    /// Whether `finish` was called.
    pub fn finishing(&self) -> bool {
        self.finishing.load(Ordering::Relaxed)
    }

    fn aborted(&self) -> Option<String> {
        self.abort.lock().ok().and_then(|a| a.clone())
    }

    /// Why the run was aborted, once it was: what a kind that runs without
    /// the engine's runner (http) polls.
    pub fn abort_reason(&self) -> Option<String> {
        if self.aborted.load(Ordering::Relaxed) {
            self.aborted()
        } else {
            None
        }
    }
}

/// The flows one end drives, and where their connections come from.
/// The workload that drives them comes with them: a kind whose exchange
/// opens a connection per transaction has a [`TransientWorkload`], the others
/// a [`Workload`], so neither can be asked to do what it cannot.
pub enum SideFlows {
    /// One long-lived connection per flow, opened during set-up (streams, tcp-rr).
    Connected {
        workload: Arc<dyn Workload>,
        flows: Vec<Flow>,
    },
    /// Flows whose connections come and go, one per transaction (tcp-crr).
    /// Without an intake, this end opens them: each worker its own share of
    /// the flows. With one, the peer opens them: the runner deals each
    /// arrival to a worker, round-robin, and every worker serves every flow.
    Transient {
        workload: Arc<dyn TransientWorkload>,
        flows: Vec<FlowSlot>,
        intake: Option<Arc<crate::intake::Intake>>,
    },
}

/// What one worker thread is given.
enum Share {
    Connected(Arc<dyn Workload>, Vec<Flow>),
    Transient(Arc<dyn TransientWorkload>, Vec<FlowSlot>, Option<WorkerIntake>),
}

impl Share {
    fn flows(&self) -> usize {
        match self {
            Share::Connected(_, f) => f.len(),
            Share::Transient(_, f, _) => f.len(),
        }
    }

    /// Its flows that send (what the end's send cap is split by). A worker
    /// of an intake may get any flow's connections: each counts as one.
    fn senders(&self) -> usize {
        match self {
            Share::Connected(_, f) => f.iter().filter(|f| f.role != Role::Receiver).count(),
            Share::Transient(_, f, Some(_)) => usize::from(f.iter().any(|f| f.role != Role::Receiver)),
            Share::Transient(_, f, None) => f.iter().filter(|f| f.role != Role::Receiver).count(),
        }
    }
}

/// Spreads `items` over at most `n` buckets, round-robin.
fn buckets<T>(items: Vec<T>, n: usize) -> Vec<Vec<T>> {
    let mut b: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
    for (i, x) in items.into_iter().enumerate() {
        b[i % n].push(x);
    }
    b
}

/// One flow as this end measured it.
#[derive(Debug, Clone)]
pub struct FlowOutcome {
    pub id: u32,
    pub direction: Direction,
    pub role: Role,
    pub window_bytes: u64,
    pub total_bytes: u64,
    pub window_s: f64,
    pub final_buffers: BufPair,
    /// TCP_INFO when the window closed.
    pub tcp_info: Option<TcpInfo>,
    /// Transactions completed inside the window.
    pub window_transactions: u64,
    /// UDP stream receivers: the datagram accounting over exactly the window.
    pub window_udp: Option<SeqInterval>,
    /// UDP flows: datagram accounting over the whole test.
    pub udp: Option<crate::flow::UdpAccount>,
    /// The kind's own counts of the flow over the window (see [`KindCounts`]).
    pub counts: KindCounts,
    /// Connection-per-transaction flows: buffers and options of the first connection.
    pub first_connection: Option<FirstConnection>,
    /// TCP stream senders with `--msg-zerocopy`: the kernel's completion notices.
    pub zerocopy: Option<netrig_proto::report::ZeroCopyReport>,
    /// TCP stream receivers: their reads.
    pub reads: Option<netrig_proto::report::ReadReport>,
    /// TCP stream senders: their sends.
    pub sends: Option<netrig_proto::report::SendReport>,
}

impl FlowOutcome {
    /// The flow as this end reports it to the other: `requested` buffers,
    /// and the buffers and options read back at set-up (`setup`), or from
    /// the first connection of a connection-per-transaction flow.
    pub fn report(
        &self,
        spec: &netrig_proto::TestSpec,
        requested: BufPair,
        setup: Option<(BufPair, netrig_proto::report::AppliedOptions)>,
    ) -> netrig_proto::report::FlowReport {
        let rules = spec.rules();
        let (initial, applied) = setup
            .or_else(|| {
                self.first_connection
                    .as_ref()
                    .map(|c| (c.initial, c.applied.clone()))
            })
            .unwrap_or_default();
        netrig_proto::report::FlowReport {
            id: self.id,
            direction: self.direction,
            role: self.role,
            window_bytes: self.window_bytes,
            total_bytes: self.total_bytes,
            window_s: self.window_s,
            socket_buffers: netrig_proto::report::SockBufReport {
                requested,
                initial,
                final_: self.final_buffers,
            },
            applied,
            tcp_info: self.tcp_info.as_ref().map(measure::TcpInfo::from),
            window_transactions: self.window_transactions,
            udp: self
                .udp
                .as_ref()
                .filter(|_| rules.transport().datagrams())
                .map(|u| {
                    let mut u = netrig_proto::report::UdpFlowReport {
                        sent_datagrams: u.sent_datagrams,
                        window_sent_datagrams: 0,
                        received: u.received.as_ref().map(measure::SeqSummary::from),
                        stray: u.stray,
                        late: u.late,
                        units: u.units,
                        window: None,
                    };
                    if let (Exchange::Stream, Some(size)) = (rules.exchange(), rules.datagram_size()) {
                        // Every datagram of a UDP stream's flow has the same size.
                        u.window_sent_datagrams = self.window_bytes / u64::from(size.max(1));
                        u.window = self.window_udp.as_ref().map(measure::SeqInterval::from);
                    }
                    u
                }),
            counts: self.counts.clone(),
            zerocopy: self.zerocopy,
            reads: self.reads,
            sends: self.sends,
        }
    }
}

/// This end's measurements, those the report carries as the wire has them.
#[derive(Debug, Clone)]
pub struct SideOutcome {
    pub flows: Vec<FlowOutcome>,
    pub window_s: f64,
    pub intervals: Vec<IntervalSample>,
    /// Whole-machine CPU over exactly the window (same sample instants as the bytes).
    pub cpu: Option<measure::CpuUsage>,
    /// Wall time between the two /proc/stat readings.
    pub cpu_window_s: Option<f64>,
    pub workers: Vec<WorkerCpu>,
    /// Latency of the transactions completed inside the window (requesters only).
    pub latency: Option<measure::LatencySummary>,
    /// Their whole histogram ([`LatencyRecorder::to_base64`]).
    pub latency_histogram: Option<String>,
    /// Open loop: schedule keeping inside the window.
    pub schedule: Option<ScheduleReport>,
    /// Arrivals of the intake that no worker had room for (closed unanswered).
    pub dropped_connections: u64,
    /// The kernel's counts over the window's two marks, beside netrig's.
    pub witness: Option<netrig_proto::report::WitnessReport>,
    /// What the end's send cap did ([`RunPlan::send_cap_bps`]), if it had one.
    pub send_cap: Option<crate::cap::CapUse>,
    /// This end's clock and the one-way delays its receivers measured.
    pub one_way: Option<netrig_proto::clock::OneWayReport>,
}

struct Meta {
    id: u32,
    direction: Direction,
    role: Role,
    counters: Arc<FlowCounters>,
    /// The flow's socket, shared with its worker, for TCP_INFO from this
    /// thread; it keeps the descriptor open until the run is over. None for
    /// flows whose connections come and go (tcp-crr).
    socket: Option<Arc<crate::FlowSocket>>,
    /// A UDP stream receiver: its datagram accounting is sampled.
    udp_receiver: bool,
    /// A tcp-crr requester: its failed transactions are sampled.
    counts_failures: bool,
}

fn snapshot(meta: &[Meta]) -> Vec<u64> {
    meta.iter().map(|m| m.counters.bytes()).collect()
}

fn tcp_infos(meta: &[Meta]) -> Vec<Option<TcpInfo>> {
    meta.iter()
        .map(|m| {
            m.socket
                .as_ref()
                .and_then(|s| s.tcp().ok())
                .and_then(|s| netrig_metrics::tcp_info(s.as_fd()).ok())
        })
        .collect()
}

/// A worker thread's CPU clock, readable from another thread while it lives.
struct WorkerClock {
    flows: u32,
    clock: Option<libc::clockid_t>,
    /// The CPU the worker is pinned to.
    cpu: Option<u32>,
}

impl WorkerClock {
    fn read(&self) -> Option<Duration> {
        let clock = self.clock?;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer; an invalid clock id is reported as an error.
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
}

/// What the sampler records at the window's first and last instants: the
/// counts an interim sample takes, and the CPU clocks.
struct Mark {
    counts: Point,
    cpu: Option<CpuSnapshot>,
    workers: Vec<Option<Duration>>,
    /// The kernel's counts beside netrig's, read once the window's edge is
    /// set (after the transaction counters switch, so that reading them,
    /// which takes a few system calls per flow, never widens the window).
    witness: Option<WitnessMark>,
}

fn mark(meta: &[Meta], clocks: &[WorkerClock], measure_cpu: bool) -> Mark {
    let cpu = measure_cpu
        .then(|| netrig_metrics::read_proc_stat().ok())
        .flatten();
    let workers = clocks.iter().map(WorkerClock::read).collect();
    Mark {
        // TCP_INFO is read apart, where it is needed.
        counts: point_without_tcp(meta),
        cpu,
        workers,
        witness: None,
    }
}

impl Meta {
    /// A flow as the sampler sees it: `socket`, the flow's own, or `None`
    /// for flows whose connections come and go (tcp-crr).
    fn new(
        id: u32,
        direction: Direction,
        role: Role,
        counters: &Arc<FlowCounters>,
        socket: Option<Arc<crate::FlowSocket>>,
    ) -> Meta {
        Meta {
            id,
            direction,
            role,
            counters: counters.clone(),
            udp_receiver: role == Role::Receiver
                && socket
                    .as_deref()
                    .is_some_and(|s| matches!(s, crate::FlowSocket::Udp(_))),
            counts_failures: role == Role::Requester && socket.is_none(),
            socket,
        }
    }

    /// The flow as the witness reads the kernel's counts of it.
    fn witnessed(&self) -> WitnessFlow {
        WitnessFlow {
            role: self.role,
            counters: self.counters.clone(),
            socket: self.socket.clone(),
        }
    }
}

/// An intake's dealer, and the intake that starts dealing with it once the
/// workers run.
type Dealing = (crate::intake::Dealer, Arc<crate::intake::Intake>);

/// The flows as the sampler sees them, and each worker's share of them (at
/// most `plan.workers`); with an intake, the dealer that feeds the workers.
type Assigned = (Vec<Meta>, Vec<Share>, Option<Dealing>);

/// Deals this end's flows to its workers ([`Assigned`]).
fn assign(flows: SideFlows, plan: &RunPlan) -> Result<Assigned, EngineError> {
    match flows {
        SideFlows::Connected { workload, flows } => {
            let m = flows
                .iter()
                .map(|f| Meta::new(f.id, f.direction, f.role, &f.counters, Some(f.socket.clone())))
                .collect();
            let n = plan.workers.clamp(1, flows.len().max(1));
            let shares = buckets(flows, n)
                .into_iter()
                .map(|b| Share::Connected(workload.clone(), b))
                .collect();
            Ok((m, shares, None))
        }
        SideFlows::Transient {
            workload,
            flows,
            intake,
        } => {
            let m = flows
                .iter()
                .map(|f| Meta::new(f.id, f.direction, f.role, &f.counters, None))
                .collect();
            let n = plan.workers.clamp(1, flows.len().max(1));
            let Some(intake) = intake else {
                let shares = buckets(flows, n)
                    .into_iter()
                    .map(|b| Share::Transient(workload.clone(), b, None))
                    .collect();
                return Ok((m, shares, None));
            };
            let (dealer, mut intakes) = crate::intake::deal(n, crate::intake::WORKER_CAPACITY)
                .map_err(|e| EngineError::Setup(format!("worker intake: {e}")))?;
            // The listener, if offered, goes to every worker: each
            // accepts on it (the agent's thread deals only what
            // comes while it is not lent).
            if let Some(door) = intake.take_door() {
                let door: std::sync::Arc<dyn crate::intake::Door> = std::sync::Arc::from(door);
                for i in &mut intakes {
                    i.door = Some(door.clone());
                }
            }
            let shares = intakes
                .into_iter()
                .map(|i| Share::Transient(workload.clone(), flows.clone(), Some(i)))
                .collect();
            Ok((m, shares, Some((dealer, intake))))
        }
    }
}

/// What every worker is told of the run (each then gets its own index and
/// share of the send cap).
fn worker_control(
    plan: &RunPlan,
    ctl: &RunControl,
    recording: &Arc<AtomicBool>,
    intervals: Option<Arc<IntervalLatencies>>,
) -> WorkerControl {
    WorkerControl {
        stop: ctl.stop.clone(),
        aborted: ctl.aborted.clone(),
        drain: plan.drain,
        recording: recording.clone(),
        start: plan.start,
        window: match plan.limit {
            Limit::Duration { seconds } => Some((
                plan.start + plan.omit,
                plan.start + Duration::from_secs_f64(seconds),
            )),
            Limit::Bytes { .. } => None,
        },
        test_id: plan.test_id,
        intervals,
        worker: 0,
        send_cap: None,
        clock_ref: plan.clock_ref.unwrap_or(plan.start),
    }
}

/// The end's send cap as its workers spend it: how long they waited for
/// it, and what they sent under it, all together.
#[derive(Default)]
struct CapSpent {
    waited: Arc<std::sync::atomic::AtomicU64>,
    spent: Arc<std::sync::atomic::AtomicU64>,
}

impl CapSpent {
    /// What the cap did, if the end had one.
    fn used(&self, cap_bps: Option<u64>) -> Option<crate::cap::CapUse> {
        cap_bps.map(|cap_bps| crate::cap::CapUse {
            cap_bps,
            waited: Duration::from_nanos(self.waited.load(Ordering::Relaxed)),
            bytes: self.spent.load(Ordering::Relaxed),
        })
    }
}

/// The workers' threads, their CPU clocks, and where they say they are done.
type Started = (
    Vec<std::thread::JoinHandle<()>>,
    Vec<WorkerClock>,
    mpsc::Receiver<WorkerDone>,
);

/// The workers, started: each on its share (those with flows), pinned as
/// the plan says, with its part of the send cap (split over the workers by
/// the flows each sends on). Their threads, their CPU clocks, and where
/// they say they are done.
fn start_workers(
    shares: Vec<Share>,
    plan: &RunPlan,
    wctl: &WorkerControl,
    cap: &CapSpent,
) -> Result<Started, EngineError> {
    let all_senders: usize = shares.iter().map(Share::senders).sum();
    let (done_tx, done_rx) = mpsc::channel::<WorkerDone>();
    let mut handles = Vec::new();
    let mut clocks = Vec::new();
    for (w, share) in shares.into_iter().enumerate().filter(|(_, s)| s.flows() > 0) {
        let (mut wctl, tx) = (wctl.clone(), done_tx.clone());
        wctl.send_cap = plan.send_cap_bps.filter(|_| share.senders() > 0).map(|bps| {
            crate::cap::CapShare::split(
                bps,
                share.senders(),
                all_senders,
                cap.waited.clone(),
                cap.spent.clone(),
            )
        });
        let flows = share.flows() as u32;
        let index = clocks.len();
        wctl.worker = index;
        let pin = plan
            .cpus
            .as_ref()
            .filter(|c| !c.is_empty())
            .map(|c| c[index % c.len()]);
        let option = plan.cpus_option;
        let h = std::thread::Builder::new()
            .name(format!("netrig-worker-{w}"))
            .spawn(move || {
                let pinned = match pin {
                    Some(cpu) => crate::affinity::pin_current_thread(cpu).map_err(|e| {
                        EngineError::Setup(format!("{option}: cannot pin worker {index} to CPU {cpu}: {e}"))
                    }),
                    None => Ok(()),
                };
                let result = pinned.and_then(|()| match share {
                    Share::Connected(workload, flows) => workload.run_worker(flows, &wctl),
                    Share::Transient(workload, flows, intake) => workload.run_transient(flows, intake, &wctl),
                });
                let _ = tx.send(WorkerDone {
                    worker: index,
                    result,
                    cpu_at_exit: netrig_metrics::thread_cpu_time(),
                    last_cpu: crate::affinity::current_cpu(),
                });
            })
            .map_err(|e| EngineError::Setup(format!("cannot start worker thread: {e}")))?;
        let mut clock: libc::clockid_t = 0;
        // SAFETY: the thread is not joined yet, so its pthread_t is valid; `clock` is a valid out-pointer.
        let rc = unsafe { libc::pthread_getcpuclockid(h.as_pthread_t(), &mut clock) };
        clocks.push(WorkerClock {
            flows,
            clock: (rc == 0).then_some(clock),
            cpu: pin,
        });
        handles.push(h);
    }
    Ok((handles, clocks, done_rx))
}

/// Runs this end's flows to the end of the test and returns what it measured.
/// `on_interval` sees each interim sample as soon as it is taken.
pub fn run_side(
    flows: SideFlows,
    plan: &RunPlan,
    ctl: &RunControl,
    on_interval: &mut dyn FnMut(&IntervalSample),
) -> Result<SideOutcome, EngineError> {
    let (meta, shares, intake) = assign(flows, plan)?;
    let ids: Vec<u32> = meta.iter().map(|m| m.id).collect();
    let witness = Witness::new(meta.iter().map(Meta::witnessed).collect(), plan.transport);
    let recording = Arc::new(AtomicBool::new(false));
    // Requesters record latencies; with interim reports, per period too.
    let period_latencies =
        (plan.interval.is_some() && meta.iter().any(|m| m.role == Role::Requester)).then(|| {
            Arc::new(IntervalLatencies::new(
                shares.iter().filter(|s| s.flows() > 0).count(),
            ))
        });
    let wctl = worker_control(plan, ctl, &recording, period_latencies.clone());
    let cap = CapSpent::default();
    let (handles, clocks, done_rx) = start_workers(shares, plan, &wctl, &cap)?;
    // The peer's connections go straight to the workers from now on (those
    // that came before wait in the intake until here).
    let mut dropped_early = 0;
    let intake = intake.map(|(dealer, intake)| {
        dropped_early = intake.start(dealer);
        intake
    });
    let mut waiter = Waiter::new(done_rx, handles.len(), clocks.len(), ctl);
    log::debug!("{} flow(s) on {} worker(s)", meta.len(), handles.len());
    let result = Sampler {
        meta: &meta,
        ids: &ids,
        clocks: &clocks,
        recording: &recording,
        periods: period_latencies.as_deref(),
        plan,
        ctl,
        witness: &witness,
        on_interval,
        intervals: Vec::new(),
    }
    .run(&mut waiter);
    let joined = stop_workers(ctl, plan, &mut waiter, handles);
    if let Some(i) = &intake {
        i.close();
    }
    let (window, intervals, first, last) = result?;
    joined?;
    if let Some(reason) = ctl.aborted() {
        return Err(EngineError::Aborted(reason));
    }
    let edges = Edges {
        window: &window,
        first: &first,
        last: &last,
        start: plan.start,
    };
    let flows = edges.flows(&meta, &waiter);
    let window_s = flows.iter().map(|f| f.window_s).fold(0.0, f64::max);
    let cpu = match (&first.cpu, &last.cpu) {
        (Some(a), Some(b)) => Some(measure::CpuUsage::from(&b.usage_since(a))),
        _ => None,
    };
    let wall = edges.wall();
    let clocks_now = clocks_now();
    Ok(SideOutcome {
        flows,
        window_s,
        intervals,
        cpu_window_s: cpu.as_ref().map(|_| wall),
        cpu,
        workers: edges.workers(&clocks, &waiter),
        latency: waiter
            .latency
            .as_ref()
            .filter(|l| !l.is_empty())
            .map(|l| measure::LatencySummary::from(&l.summary())),
        latency_histogram: waiter
            .latency
            .as_ref()
            .filter(|l| !l.is_empty())
            .map(LatencyRecorder::to_base64),
        schedule: waiter.schedule.map(schedule_report),
        dropped_connections: dropped_early,
        send_cap: cap.used(plan.send_cap_bps),
        witness: match (&first.witness, &last.witness) {
            (Some(a), Some(b)) => Some(witness.report(a, b)),
            _ => None,
        },
        one_way: Some(netrig_proto::clock::OneWayReport {
            zero_ns: realtime_at(plan.start, clocks_now),
            ref_ns: realtime_at(plan.clock_ref.unwrap_or(plan.start), clocks_now),
            received: waiter
                .one_way
                .as_ref()
                .filter(|l| !l.is_empty())
                .map(LatencyRecorder::to_base64),
            clocks: Default::default(),
        }),
    })
}

/// Stops the workers, whatever happened, and waits for them (bounded by
/// the drain): Err when one failed or did not finish in time.
fn stop_workers(
    ctl: &RunControl,
    plan: &RunPlan,
    waiter: &mut Waiter,
    handles: Vec<std::thread::JoinHandle<()>>,
) -> Result<(), EngineError> {
    log::debug!("window closed; waiting for workers to drain");
    ctl.stop.store(true, Ordering::Relaxed);
    let join_deadline = Instant::now() + plan.drain + Duration::from_secs(5);
    let joined = waiter.wait_all(join_deadline);
    if joined.is_err() {
        // Workers still running past the drain bound stop at once: a sender sleeping off its
        // debt to the agent's --max-rate (a large answer under a small cap) would otherwise
        // hold its thread and sockets until the debt is paid.
        ctl.aborted.store(true, Ordering::Relaxed);
    }
    log::debug!(
        "workers joined: {}",
        if joined.is_ok() { "ok" } else { "with an error" }
    );
    for h in handles {
        if h.is_finished() {
            let _ = h.join();
        }
    }
    joined
}

/// An open loop's schedule keeping, as the report has it.
fn schedule_report(s: ScheduleStats) -> ScheduleReport {
    ScheduleReport {
        due: s.due,
        late: s.late,
        max_behind_us: s.behind_max_ns as f64 / 1e3,
        mean_behind_us: if s.due > 0 {
            s.behind_sum_ns as f64 / s.due as f64 / 1e3
        } else {
            0.0
        },
    }
}

/// The measured window and the sampler's marks at its edges: what turns
/// the workers' ends into the end's figures.
struct Edges<'e> {
    window: &'e Window,
    first: &'e Mark,
    last: &'e Mark,
    /// This end's time zero.
    start: Instant,
}

impl Edges<'_> {
    /// Wall time between the window's two marks.
    fn wall(&self) -> f64 {
        self.last
            .counts
            .at
            .saturating_duration_since(self.first.counts.at)
            .as_secs_f64()
    }

    /// Each flow as this end measured it: over the window's marks (a timed
    /// test), or from the start to its end (a byte count).
    fn flows(&self, meta: &[Meta], waiter: &Waiter) -> Vec<FlowOutcome> {
        let (first, last) = (&self.first.counts, &self.last.counts);
        let ends: HashMap<u32, &FlowEnd> = waiter.ends.iter().map(|e| (e.id, e)).collect();
        meta.iter()
            .enumerate()
            .map(|(i, m)| {
                let end = ends.get(&m.id).copied();
                let seen = waiter.transient.get(&m.id);
                let (window_bytes, window_s) = match self.window {
                    Window::Timed { seconds } => (last.bytes[i].saturating_sub(first.bytes[i]), *seconds),
                    Window::Counted { end_at } => {
                        let done = end.and_then(|e| e.done_at).unwrap_or(*end_at);
                        let total = end.map(|e| e.total_bytes).unwrap_or_else(|| m.counters.bytes());
                        (total, done.saturating_duration_since(self.start).as_secs_f64())
                    }
                };
                FlowOutcome {
                    id: m.id,
                    direction: m.direction,
                    role: m.role,
                    window_bytes,
                    total_bytes: end.map(|e| e.total_bytes).unwrap_or_else(|| m.counters.bytes()),
                    window_s,
                    final_buffers: end
                        .map(|e| e.final_buffers)
                        .or_else(|| Some(seen?.first.as_ref()?.done))
                        .unwrap_or_default(),
                    tcp_info: last.tcp.get(i).cloned().flatten(),
                    window_transactions: last.transactions[i].saturating_sub(first.transactions[i]),
                    window_udp: match (self.window, &first.udp[i], &last.udp[i]) {
                        // Counted from the start of the test.
                        (Window::Counted { .. }, _, Some(b)) => Some(b.since(&SeqLive::default())),
                        (_, Some(a), Some(b)) => Some(b.since(a)),
                        _ => None,
                    },
                    udp: end.and_then(|e| e.udp.clone()),
                    counts: waiter.counts.get(&m.id).cloned().unwrap_or_default(),
                    first_connection: seen.and_then(|t| t.first.clone()),
                    zerocopy: end.and_then(|e| e.zerocopy),
                    reads: end.and_then(|e| e.reads),
                    sends: end.and_then(|e| e.sends),
                }
            })
            .collect()
    }

    /// Each worker's CPU time over the window (to its exit, for one that
    /// ended before the window did), against the window's wall time.
    fn workers(&self, clocks: &[WorkerClock], waiter: &Waiter) -> Vec<WorkerCpu> {
        let wall = self.wall();
        clocks
            .iter()
            .enumerate()
            .filter_map(|(w, c)| {
                let start = self.first.workers.get(w).copied().flatten()?;
                let end = self
                    .last
                    .workers
                    .get(w)
                    .copied()
                    .flatten()
                    .or(waiter.exit_cpu[w])?;
                let cpu_s = end.saturating_sub(start).as_secs_f64();
                Some(WorkerCpu {
                    worker: w as u32,
                    flows: c.flows,
                    cpu_s,
                    busy_pct: if wall > 0.0 { cpu_s / wall * 100.0 } else { 0.0 },
                    cpu: c.cpu,
                    last_cpu: waiter.last_cpu[w],
                })
            })
            .collect()
    }
}

/// `CLOCK_REALTIME` at `t`, ns since the epoch, by `now` (a reading of
/// both clocks at once, [`clocks_now`]): every instant of one end mapped by
/// one reading, so their differences are the monotonic clock's exactly.
pub fn realtime_at(t: Instant, now: (Instant, u64)) -> u64 {
    let (mono, rt) = now;
    if t <= mono {
        rt.saturating_sub(mono.duration_since(t).as_nanos() as u64)
    } else {
        rt.saturating_add(t.duration_since(mono).as_nanos() as u64)
    }
}

/// The monotonic clock and `CLOCK_REALTIME` (ns since the epoch) at one
/// instant: of five readings of realtime between two of the monotonic
/// clock, the one bracketed most tightly, at the bracket's middle.
pub fn clocks_now() -> (Instant, u64) {
    let realtime = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    };
    (0..5)
        .map(|_| {
            let a = Instant::now();
            let rt = realtime();
            let b = Instant::now();
            (b - a, a + (b - a) / 2, rt)
        })
        .min_by_key(|(width, ..)| *width)
        .map(|(_, mono, rt)| (mono, rt))
        .unwrap_or_else(|| (Instant::now(), realtime()))
}

/// What a worker thread sends when it is done.
struct WorkerDone {
    /// Index in spawn order, which is also its clock's index.
    worker: usize,
    result: Result<WorkerEnd, EngineError>,
    /// The thread's own CPU time when it finished (for workers that end before the window does).
    cpu_at_exit: Duration,
    /// The CPU it ran on when it finished.
    last_cpu: Option<u32>,
}

enum Window {
    Timed { seconds: f64 },
    Counted { end_at: Instant },
}

struct Waiter {
    rx: mpsc::Receiver<WorkerDone>,
    pending: usize,
    ends: Vec<FlowEnd>,
    exit_cpu: Vec<Option<Duration>>,
    last_cpu: Vec<Option<u32>>,
    stop: Arc<AtomicBool>,
    latency: Option<LatencyRecorder>,
    /// What the workers' receivers measured of one-way delay.
    one_way: Option<LatencyRecorder>,
    schedule: Option<ScheduleStats>,
    /// Connection-per-transaction flows, merged across the workers that served them.
    transient: HashMap<u32, TransientEnd>,
    /// The kind's own counts of each flow, summed across the workers that served it.
    counts: HashMap<u32, KindCounts>,
}

impl Waiter {
    /// Waits for `pending` workers (of `workers` with a CPU clock) to say
    /// they are done; a worker's error stops the others (`ctl`).
    fn new(rx: mpsc::Receiver<WorkerDone>, pending: usize, workers: usize, ctl: &RunControl) -> Waiter {
        Waiter {
            rx,
            pending,
            ends: Vec::new(),
            exit_cpu: vec![None; workers],
            last_cpu: vec![None; workers],
            stop: ctl.stop.clone(),
            latency: None,
            one_way: None,
            schedule: None,
            transient: HashMap::new(),
            counts: HashMap::new(),
        }
    }

    /// Waits until `until` for a worker to finish; a worker's error stops all.
    fn wait(&mut self, until: Instant) -> Result<(), EngineError> {
        if self.pending == 0 {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            return Ok(());
        }
        match self
            .rx
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            Ok(done) => {
                self.pending -= 1;
                if let Some(slot) = self.exit_cpu.get_mut(done.worker) {
                    *slot = Some(done.cpu_at_exit);
                }
                if let Some(slot) = self.last_cpu.get_mut(done.worker) {
                    *slot = done.last_cpu;
                }
                match done.result {
                    Ok(end) => {
                        self.ends.extend(end.flows);
                        if let Some(l) = end.latency {
                            match &mut self.latency {
                                Some(all) => all.merge(&l),
                                None => self.latency = Some(l),
                            }
                        }
                        if let Some(l) = end.one_way {
                            match &mut self.one_way {
                                Some(all) => all.merge(&l),
                                None => self.one_way = Some(l),
                            }
                        }
                        if let Some(sch) = end.schedule {
                            self.schedule
                                .get_or_insert_with(ScheduleStats::default)
                                .merge(&sch);
                        }
                        for (id, c) in end.counts {
                            self.counts.entry(id).or_default().add(&c);
                        }
                        for t in end.transient {
                            let all = self.transient.entry(t.id).or_insert_with(|| TransientEnd {
                                id: t.id,
                                ..TransientEnd::default()
                            });
                            if all.first.is_none() {
                                all.first = t.first;
                            }
                        }
                        Ok(())
                    }
                    Err(e) => {
                        self.stop.store(true, Ordering::Relaxed);
                        Err(e)
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(()),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.pending = 0;
                Err(EngineError::Setup("a worker thread died".into()))
            }
        }
    }

    fn wait_all(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let mut first_err = None;
        while self.pending > 0 {
            if Instant::now() >= deadline {
                return Err(EngineError::Setup(format!(
                    "{} worker(s) did not finish within the drain time",
                    self.pending
                )));
            }
            if let Err(e) = self.wait(deadline) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// Sleeps until `t`, waking early to notice aborts, worker failures and
/// a graceful finish ([`RunControl::finish`], which ends the wait at once).
fn sleep_until(t: Instant, ctl: &RunControl, waiter: &mut Waiter) -> Result<(), EngineError> {
    loop {
        if let Some(reason) = ctl.aborted() {
            return Err(EngineError::Aborted(reason));
        }
        let now = Instant::now();
        if now >= t || ctl.finishing() {
            return Ok(());
        }
        let step = if ctl.finishable.load(Ordering::Relaxed) {
            FINISH_POLL
        } else {
            Duration::from_millis(50)
        };
        waiter.wait(t.min(now + step))?;
    }
}

/// The counters at one instant.
#[derive(Clone)]
struct Point {
    at: Instant,
    bytes: Vec<u64>,
    transactions: Vec<u64>,
    tcp: Vec<Option<TcpInfo>>,
    udp: Vec<Option<SeqLive>>,
    failures: Vec<u64>,
}

/// Opens every flow's window: the counts at which it opened.
fn open_windows(meta: &[Meta]) -> Vec<u64> {
    meta.iter().map(|m| m.counters.open_window()).collect()
}

/// Closes every flow's window: the counts at which it closed.
fn close_windows(meta: &[Meta]) -> Vec<u64> {
    meta.iter().map(|m| m.counters.close_window()).collect()
}

/// The running datagram counts of UDP stream receivers (`None` for other flows).
fn udp_snapshot(meta: &[Meta]) -> Vec<Option<SeqLive>> {
    meta.iter()
        .map(|m| m.udp_receiver.then(|| m.counters.udp()))
        .collect()
}

/// An interim sample at the end of a period: counts first (each flow's
/// transaction counter switched to period `next` in the same step), then
/// TCP_INFO.
fn point(meta: &[Meta], next: u32) -> Point {
    let p = point_without_tcp(meta);
    Point {
        transactions: meta.iter().map(|m| m.counters.switch_interval(next)).collect(),
        tcp: tcp_infos(meta),
        ..p
    }
}

fn point_without_tcp(meta: &[Meta]) -> Point {
    Point {
        at: Instant::now(),
        bytes: snapshot(meta),
        transactions: meta.iter().map(|m| m.counters.transactions()).collect(),
        udp: udp_snapshot(meta),
        tcp: Vec::new(),
        failures: failures(meta),
    }
}

/// Failed transactions of each flow so far (0 where not counted).
fn failures(meta: &[Meta]) -> Vec<u64> {
    meta.iter().map(|m| m.counters.failures()).collect()
}

/// How long the sampler waits for workers to hand over a period's latencies
/// (they do once per loop iteration, and wake at least every 10 ms).
const PERIOD_HANDOVER_WAIT: Duration = Duration::from_millis(250);

fn delta(to: &[u64], from: &[u64]) -> Vec<u64> {
    to.iter().zip(from).map(|(b, a)| b.saturating_sub(*a)).collect()
}

/// The sampler: what it reads of the flows and the workers, on the plan's
/// schedule, and where its interim samples go.
struct Sampler<'s> {
    meta: &'s [Meta],
    ids: &'s [u32],
    clocks: &'s [WorkerClock],
    /// On while the window is open (the workers record latencies then).
    recording: &'s AtomicBool,
    /// Each period's latencies, handed over by the workers.
    periods: Option<&'s IntervalLatencies>,
    plan: &'s RunPlan,
    ctl: &'s RunControl,
    witness: &'s Witness,
    on_interval: &'s mut dyn FnMut(&IntervalSample),
    intervals: Vec<IntervalSample>,
}

impl Sampler<'_> {
    /// Samples the run to its end: the window, the interim samples, and the
    /// marks at the window's edges.
    fn run(self, waiter: &mut Waiter) -> Result<(Window, Vec<IntervalSample>, Mark, Mark), EngineError> {
        match self.plan.limit {
            Limit::Duration { seconds } => self.timed(seconds, waiter),
            Limit::Bytes { .. } => self.counted(waiter),
        }
    }

    /// The window opens: the counts, the CPU clocks, each flow's
    /// transaction counter switched into it, the workers recording, the
    /// kernel's counts.
    fn open(&self) -> Mark {
        let mut first = mark(self.meta, self.clocks, self.plan.measure_cpu);
        first.counts.transactions = open_windows(self.meta);
        self.recording.store(true, Ordering::Relaxed);
        first.witness = Some(self.witness.mark());
        self.plan.watch.opened();
        first
    }

    /// The window closes: as it opened, and TCP_INFO as the window closes
    /// (read before `stop`, or a quick sender has already shut down its
    /// side: FIN_WAIT1).
    fn close(&self) -> Mark {
        let mut last = mark(self.meta, self.clocks, self.plan.measure_cpu);
        last.counts.transactions = close_windows(self.meta);
        self.recording.store(false, Ordering::Relaxed);
        last.counts.tcp = tcp_infos(self.meta);
        last.witness = Some(self.witness.mark());
        self.plan.watch.closed();
        last
    }

    /// A test of `seconds`: the window from the omitted start to its end,
    /// an interim sample every period, the last one cut short at the end.
    fn timed(
        mut self,
        seconds: f64,
        waiter: &mut Waiter,
    ) -> Result<(Window, Vec<IntervalSample>, Mark, Mark), EngineError> {
        let (plan, meta) = (self.plan, self.meta);
        let end = plan.start + Duration::from_secs_f64(seconds);
        let window_start = plan.start + plan.omit;
        sleep_until(window_start, self.ctl, waiter)?;
        let mut first = self.open();
        if plan.interval.is_some() {
            first.counts.tcp = tcp_infos(meta);
        }
        let mut prev = first.counts.clone();
        let mut index = 0;
        if let Some(iv) = plan.interval {
            let mut tick = window_start + iv;
            while tick < end && !self.ctl.finishing() {
                sleep_until(tick, self.ctl, waiter)?;
                let cur = point(meta, index + 1);
                let latency = self.latency_of(index);
                self.emit(index, &prev, &cur, latency);
                index += 1;
                prev = cur;
                tick += iv;
            }
        }
        sleep_until(end, self.ctl, waiter)?;
        let last = self.close();
        self.ctl.stop.store(true, Ordering::Relaxed);
        if plan.interval.is_some()
            && last.counts.at.saturating_duration_since(prev.at) > Duration::from_millis(1)
        {
            let latency = self.latency_of(index);
            self.emit(index, &prev, &last.counts, latency);
        }
        let seconds = last
            .counts
            .at
            .saturating_duration_since(first.counts.at)
            .as_secs_f64();
        Ok((Window::Timed { seconds }, self.intervals, first, last))
    }

    /// A test of a byte count: the window from the start of the test until
    /// every worker is done, an interim sample every period meanwhile; a
    /// test where nothing moves for the plan's stall timeout fails.
    fn counted(
        mut self,
        waiter: &mut Waiter,
    ) -> Result<(Window, Vec<IntervalSample>, Mark, Mark), EngineError> {
        let (plan, meta) = (self.plan, self.meta);
        let first = self.open();
        // Counted from the start of the test: the window is all of it.
        let mut prev = Point {
            at: plan.start,
            bytes: vec![0; meta.len()],
            transactions: vec![0; meta.len()],
            tcp: if plan.interval.is_some() {
                tcp_infos(meta)
            } else {
                Vec::new()
            },
            udp: meta
                .iter()
                .map(|m| m.udp_receiver.then(SeqLive::default))
                .collect(),
            failures: vec![0; meta.len()],
        };
        let mut index = 0;
        let mut last_progress = (Instant::now(), 0u64);
        let mut next_tick = plan.interval.map(|iv| plan.start + iv);
        while waiter.pending > 0 {
            if let Some(reason) = self.ctl.aborted() {
                return Err(EngineError::Aborted(reason));
            }
            let wake = next_tick
                .unwrap_or_else(|| Instant::now() + Duration::from_millis(100))
                .min(Instant::now() + Duration::from_millis(100));
            waiter.wait(wake)?;
            let now = Instant::now();
            let total: u64 = meta.iter().map(|m| m.counters.bytes()).sum();
            if total != last_progress.1 {
                last_progress = (now, total);
            } else if now.duration_since(last_progress.0) >= plan.stall_timeout {
                return Err(EngineError::Stalled(plan.stall_timeout.as_secs()));
            }
            if let (Some(t), Some(iv)) = (next_tick, plan.interval) {
                if now >= t && waiter.pending > 0 {
                    let cur = point(meta, index + 1);
                    self.emit(index, &prev, &cur, None);
                    index += 1;
                    prev = cur;
                    next_tick = Some(t + iv);
                }
            }
        }
        let last = self.close();
        let end_at = waiter
            .ends
            .iter()
            .filter_map(|e| e.done_at)
            .max()
            .unwrap_or_else(Instant::now);
        if plan.interval.is_some() && end_at > prev.at {
            let mut to = last.counts.clone();
            to.at = end_at;
            self.emit(index, &prev, &to, None);
        }
        Ok((Window::Counted { end_at }, self.intervals, first, last))
    }

    /// Period `period`'s latencies, once its workers have handed them over.
    fn latency_of(&self, period: u32) -> Option<LatencySummary> {
        self.periods.map(|p| p.collect(period, PERIOD_HANDOVER_WAIT))
    }

    /// The interim sample of period `index`, from `from` to `to`: to
    /// `on_interval` at once, and kept.
    fn emit(&mut self, index: u32, from: &Point, to: &Point, latency: Option<LatencySummary>) {
        let counts_failures = self.meta.iter().any(|m| m.counts_failures);
        let s = interval_sample(
            index,
            (from, to),
            self.plan.start,
            self.ids,
            counts_failures,
            latency,
        );
        (self.on_interval)(&s);
        self.intervals.push(s);
    }
}

/// The interim sample of period `index`, between two points (`start`: this
/// end's time zero, which its times count from): each flow's bytes and
/// transactions in it, TCP_INFO at its end, and where any flow has them,
/// retransmits, datagram accounting and (`counts_failures`) failed
/// transactions in it.
fn interval_sample(
    index: u32,
    (from, to): (&Point, &Point),
    start: Instant,
    ids: &[u32],
    counts_failures: bool,
    latency: Option<LatencySummary>,
) -> IntervalSample {
    let secs = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    let retransmits: Vec<Option<u32>> = from
        .tcp
        .iter()
        .zip(&to.tcp)
        .map(|(a, b)| {
            Some(
                b.as_ref()?
                    .retransmits_total
                    .saturating_sub(a.as_ref()?.retransmits_total),
            )
        })
        .collect();
    let udp: Vec<Option<measure::SeqInterval>> = from
        .udp
        .iter()
        .zip(&to.udp)
        .map(|(a, b)| Some(measure::SeqInterval::from(&b.as_ref()?.since(a.as_ref()?))))
        .collect();
    IntervalSample {
        index,
        start_s: secs(from.at),
        end_s: secs(to.at),
        ids: ids.to_vec(),
        bytes: delta(&to.bytes, &from.bytes),
        tcp_info: to
            .tcp
            .iter()
            .map(|t| t.as_ref().map(measure::TcpInfo::from))
            .collect(),
        transactions: delta(&to.transactions, &from.transactions),
        retransmits: if retransmits.iter().any(Option::is_some) {
            retransmits
        } else {
            Vec::new()
        },
        udp: if udp.iter().any(Option::is_some) {
            udp
        } else {
            Vec::new()
        },
        failures: if counts_failures {
            delta(&to.failures, &from.failures)
        } else {
            Vec::new()
        },
        latency: latency.as_ref().map(measure::LatencySummary::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_proto::{DataHello, SessionCookie};

    /// An end's instants mapped to realtime by one reading differ exactly as
    /// the monotonic clock says (one-way delay takes their difference), and
    /// the reading is now's, to well within a millisecond.
    #[test]
    fn instants_map_to_realtime_by_one_reading_exactly() {
        let zero = Instant::now();
        let reference = zero - Duration::from_micros(637);
        let later = zero + Duration::from_millis(5);
        let now = clocks_now();
        assert_eq!(realtime_at(zero, now) - realtime_at(reference, now), 637_000);
        assert_eq!(realtime_at(later, now) - realtime_at(zero, now), 5_000_000);
        let rt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let mapped = realtime_at(Instant::now(), now);
        assert!(rt.abs_diff(mapped) < 1_000_000, "{rt} against {mapped}");
    }
    use std::net::{TcpListener, TcpStream};

    /// A TCP run of `seconds` from `start`: one worker, no CPU measured.
    fn plan_of(start: Instant, seconds: f64) -> RunPlan {
        RunPlan {
            start,
            limit: Limit::Duration { seconds },
            omit: Duration::ZERO,
            interval: None,
            workers: 1,
            drain: Duration::from_millis(100),
            stall_timeout: Duration::from_secs(1),
            measure_cpu: false,
            test_id: 0,
            cpus: None,
            cpus_option: "--cpus",
            send_cap_bps: None,
            clock_ref: None,
            transport: Transport::Tcp,
            watch: Default::default(),
        }
    }

    /// Counts one transaction per arrival on the flow its greeting names.
    struct CountArrivals;

    impl TransientWorkload for CountArrivals {
        fn run_transient(
            &self,
            flows: Vec<FlowSlot>,
            intake: Option<WorkerIntake>,
            ctl: &WorkerControl,
        ) -> Result<WorkerEnd, EngineError> {
            let mut intake = intake.expect("the responder has an intake");
            let mut events = mio::Events::with_capacity(8);
            while !ctl.stop.load(Ordering::Relaxed) {
                let _ = intake.poll.poll(&mut events, Some(Duration::from_millis(10)));
                while let Ok(crate::intake::Arrival { hello, .. }) = intake.arrivals.try_recv() {
                    if let Some(f) = flows.iter().find(|f| f.id == hello.flow) {
                        let _ = f.counters.add_transactions(1);
                        f.counters.add_bytes(1);
                    }
                }
            }
            Ok(WorkerEnd::default())
        }
    }

    #[test]
    fn transient_flows_exist_from_the_start_and_get_the_dealt_arrivals() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let intake = Arc::new(crate::intake::Intake::new(64));
        let tx = intake.clone();
        let start = Instant::now();
        let plan = RunPlan {
            omit: Duration::from_millis(100),
            workers: 2,
            drain: Duration::from_secs(1),
            ..plan_of(start, 0.6)
        };
        let flows: Vec<FlowSlot> = (0..3)
            .map(|id| FlowSlot::new(id, Direction::Tx, Role::Responder, None))
            .collect();
        let feeder = std::thread::spawn(move || {
            let mut keep = Vec::new();
            std::thread::sleep(Duration::from_millis(250));
            // Ten connections for flow 1, none for flows 0 and 2.
            for _ in 0..10 {
                keep.push(TcpStream::connect(l.local_addr().unwrap()).unwrap());
                let (s, _) = l.accept().unwrap();
                let hello = DataHello {
                    version: netrig_proto::PROTOCOL_VERSION,
                    cookie: SessionCookie([0; 16]),
                    flow: 1,
                };
                tx.give(crate::intake::Arrival::new(hello, s)).unwrap();
            }
            keep
        });
        let ctl = RunControl::new();
        let out = run_side(
            SideFlows::Transient {
                workload: Arc::new(CountArrivals),
                flows,
                intake: Some(intake),
            },
            &plan,
            &ctl,
            &mut |_| {},
        )
        .unwrap();
        let _ = feeder.join();
        let counts: Vec<(u32, u64)> = out.flows.iter().map(|f| (f.id, f.window_transactions)).collect();
        assert_eq!(counts, vec![(0, 0), (1, 10), (2, 0)]);
        assert_eq!(out.workers.len(), 2);
        assert!(
            out.workers.iter().all(|w| w.flows == 3),
            "every worker serves every flow"
        );
        assert_eq!(out.dropped_connections, 0);
    }

    /// Counts a byte every millisecond on its one flow until stopped.
    struct Ticks;

    impl Workload for Ticks {
        fn run_worker(&self, flows: Vec<Flow>, ctl: &WorkerControl) -> Result<WorkerEnd, EngineError> {
            while !ctl.stop.load(Ordering::Relaxed) {
                flows.iter().for_each(|f| f.counters.add_bytes(1));
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(WorkerEnd::default())
        }
    }

    /// `finish` closes a timed run's window at once, as its end would: the
    /// run returns its figures over the shorter window, not an abort.
    #[test]
    fn finish_ends_a_timed_window_early_with_its_figures() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let start = Instant::now();
        let plan = RunPlan {
            omit: Duration::from_millis(50),
            interval: Some(Duration::from_millis(100)),
            workers: 1,
            drain: Duration::from_millis(100),
            ..plan_of(start, 30.0)
        };
        let ctl = RunControl::new();
        let finisher = ctl.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            finisher.finish();
        });
        let flows = vec![Flow::new(0, Direction::Tx, Role::Receiver, s, None)];
        let out = run_side(
            SideFlows::Connected {
                workload: Arc::new(Ticks),
                flows,
            },
            &plan,
            &ctl,
            &mut |_| {},
        )
        .unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the 30 s run ended at finish"
        );
        assert!(
            (0.25..2.0).contains(&out.window_s),
            "the window ran from the omitted 50 ms to the finish at 400 ms: {} s",
            out.window_s
        );
        assert!(out.flows[0].window_bytes > 0);
    }
}
