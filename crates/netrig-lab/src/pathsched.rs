//! The path element's class scheduler (docs/LAB.md, "DSCP classes in the element"), pure of
//! sockets: what a router's class-based weighted fair queueing with WRED per class does
//! (Cisco's CBWFQ with `bandwidth percent` and `random-detect` in a class, as the scavenger
//! study's router was configured). The kernel here has no red qdisc, so htb's classes cannot
//! carry RED; the element serves the direction's rate itself, from a queue per class.
//!
//! - **Classification** by the frame's DSCP; what no class takes goes to the default class.
//! - **Admission**, per class: RED first (its own average of its own queue, thresholds per DSCP
//!   as [`RedCfg`]), then the class's limit (drop-tail), in packets or bytes.
//! - **Service**: self-clocked fair queueing (Golestani 1994) weighted by each class's
//!   guaranteed rate. A frame's finish tag is max(virtual time, its class's last tag) + its
//!   bits / the class's rate; the link, when free, sends the head with the lowest tag among the
//!   frames that have arrived; the virtual time is the tag of the frame being sent. A class
//!   alone on the link has all of it (borrowing up to the link's rate, as htb's ceil at the
//!   link); backlogged together, each has its share in proportion to its rate.
//!
//! Service is lazy: [`Sched::serve`] sends, in order, every frame whose turn on the wire
//! begins by a given time, so a frame's departure is known when its turn starts, and the
//! element calls it before each arrival and at [`Sched::next_start`]. Frames the element has
//! not read yet cannot be chosen for a turn that began before they were read: the scheduler's
//! decisions lag the wire by the element's read latency (tens of µs), never reorder a class
//! and never idle the link while a frame waits.

use crate::pathmodel::{serialise_at, QueueDrop, RedCfg, RedState, Rng, AVPKT, LINE_BYTES};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Instant;

/// One class of the scheduler.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassCfg {
    pub name: String,
    /// The DSCP values it takes; empty: the default class (what no other class takes).
    #[serde(default)]
    pub dscp: Vec<u8>,
    /// Its guaranteed rate, bits/s: its weight in the fair queueing.
    pub rate_bps: u64,
    /// Its queue's limit, in the scheduler's unit.
    pub limit: u64,
    /// WRED on its queue, thresholds in the scheduler's unit.
    #[serde(default)]
    pub red: Option<RedCfg>,
}

/// A direction's rate served from a queue per class.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SchedCfg {
    /// The link's rate, bits/s on the wire (Ethernet header included, as htb counts).
    pub rate_bps: u64,
    /// Limits and RED thresholds count bytes (else packets).
    pub bytes: bool,
    pub classes: Vec<ClassCfg>,
}

struct Item<T> {
    arrived: Instant,
    wire: u64,
    segs: u64,
    finish: f64,
    payload: T,
}

struct ClassQ<T> {
    items: VecDeque<Item<T>>,
    bytes: u64,
    packets: u64,
    last_finish: f64,
    red: RedState,
    /// When its queue last became empty (RED's idle-time rule).
    empty_since: Option<Instant>,
}

/// What admission did with a frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Admitted {
    /// Its class (index into the configuration's classes).
    pub class: usize,
    /// The backlog it found: its class's, bytes and packets.
    pub found_bytes: u64,
    pub found_packets: u64,
    /// The backlog of all classes it found, bytes and packets.
    pub total_bytes: u64,
    pub total_packets: u64,
    /// None: queued.
    pub drop: Option<QueueDrop>,
}

/// The scheduler, holding each waiting frame's `T` (the element's frame).
pub struct Sched<T> {
    pub cfg: SchedCfg,
    by_dscp: [usize; 64],
    default: usize,
    q: Vec<ClassQ<T>>,
    vtime: f64,
    busy_until: Option<Instant>,
    backlog_bytes: u64,
    backlog_packets: u64,
}

impl<T> Sched<T> {
    /// A scheduler for `cfg`; the default class is the one without DSCP values (the last class
    /// when every class has some).
    pub fn new(cfg: SchedCfg) -> Self {
        let n = cfg.classes.len().max(1);
        let default = cfg
            .classes
            .iter()
            .position(|c| c.dscp.is_empty())
            .unwrap_or(n - 1);
        let mut by_dscp = [default; 64];
        for (k, c) in cfg.classes.iter().enumerate() {
            for d in &c.dscp {
                by_dscp[*d as usize & 63] = k;
            }
        }
        let q = (0..n)
            .map(|_| ClassQ {
                items: VecDeque::new(),
                bytes: 0,
                packets: 0,
                last_finish: 0.0,
                red: RedState::default(),
                empty_since: None,
            })
            .collect();
        Sched {
            cfg,
            by_dscp,
            default,
            q,
            vtime: 0.0,
            busy_until: None,
            backlog_bytes: 0,
            backlog_packets: 0,
        }
    }

    /// The class a frame with `dscp` goes to (not IP: the default class).
    pub fn class_of(&self, dscp: Option<u8>) -> usize {
        match dscp {
            Some(d) => self.by_dscp[d as usize & 63],
            None => self.default,
        }
    }

    /// Frames waiting (all classes), bytes and packets.
    pub fn backlog(&self) -> (u64, u64) {
        (self.backlog_bytes, self.backlog_packets)
    }

    /// RED's average queue of a class now.
    pub fn avg(&self, class: usize) -> f64 {
        self.q.get(class).map_or(0.0, |c| c.red.avg())
    }

    /// When the next frame's turn on the wire begins; None when nothing waits.
    pub fn next_start(&self) -> Option<Instant> {
        let head = self
            .q
            .iter()
            .filter_map(|c| c.items.front().map(|i| i.arrived))
            .min()?;
        Some(self.busy_until.map_or(head, |b| b.max(head)))
    }

    /// Sends, in order, every frame whose turn on the wire begins at or before `until`:
    /// `out(class, departure, frame)`, the departure the end of its serialisation.
    pub fn serve(&mut self, until: Instant, mut out: impl FnMut(usize, Instant, T)) {
        while let Some(t) = self.next_start() {
            if t > until {
                break;
            }
            let mut pick: Option<(usize, f64)> = None;
            for (k, c) in self.q.iter().enumerate() {
                if let Some(i) = c.items.front().filter(|i| i.arrived <= t) {
                    if pick.is_none_or(|(_, f)| i.finish < f) {
                        pick = Some((k, i.finish));
                    }
                }
            }
            let (k, _) = pick.expect("a frame has arrived by its turn");
            let c = &mut self.q[k];
            let it = c.items.pop_front().expect("picked");
            c.bytes -= it.wire;
            c.packets -= it.segs;
            if c.items.is_empty() {
                c.empty_since = Some(t);
            }
            self.backlog_bytes -= it.wire;
            self.backlog_packets -= it.segs;
            self.vtime = it.finish;
            let depart = t + serialise_at(self.cfg.rate_bps, it.wire);
            self.busy_until = Some(depart);
            out(k, depart, it.payload);
        }
    }

    /// A frame of `wire` bytes, `segs` packets on the wire (a GSO super-frame's segments),
    /// with `dscp`, arrives at `now`; call [`Sched::serve`] up to `now` first. RED of its class,
    /// then its class's limit; else it waits with its finish tag.
    pub fn admit(
        &mut self,
        now: Instant,
        wire: u64,
        segs: u64,
        dscp: Option<u8>,
        payload: T,
        rng: &mut Rng,
    ) -> Admitted {
        let k = self.class_of(dscp).min(self.q.len() - 1);
        let (bytes, rate) = (self.cfg.bytes, self.cfg.rate_bps);
        if self.backlog_packets == 0 && self.busy_until.is_none_or(|b| b <= now) {
            // The whole scheduler idle: the virtual clock starts again (tags stay small).
            self.vtime = 0.0;
            for c in &mut self.q {
                c.last_finish = 0.0;
            }
        }
        let c = &mut self.q[k];
        let mut a = Admitted {
            class: k,
            found_bytes: c.bytes,
            found_packets: c.packets,
            total_bytes: self.backlog_bytes,
            total_packets: self.backlog_packets,
            drop: None,
        };
        let (found, add) = if bytes { (c.bytes, wire) } else { (c.packets, segs) };
        let cls = self.cfg.classes.get(k);
        if let Some(red) = cls.and_then(|c| c.red.as_ref()) {
            let idle = match c.empty_since {
                Some(e) if c.items.is_empty() && now > e => Some(now.duration_since(e)),
                _ => None,
            };
            let avpkt = serialise_at(rate, AVPKT as u64);
            if let Some(d) = c.red.judge(red, found as f64, idle, avpkt, dscp, rng) {
                a.drop = Some(d);
                return a;
            }
        }
        // The class's limit; and, whatever the limits configured, no more than the element's
        // memory bound for a direction's frames in all classes together.
        if found + add > cls.map_or(u64::MAX, |c| c.limit) || self.backlog_bytes + wire > LINE_BYTES as u64 {
            a.drop = Some(QueueDrop::Tail);
            return a;
        }
        let weight = cls.map_or(rate, |c| c.rate_bps).max(1) as f64;
        let finish = self.vtime.max(c.last_finish) + (wire * 8) as f64 / weight;
        c.last_finish = finish;
        c.items.push_back(Item {
            arrived: now,
            wire,
            segs,
            finish,
            payload,
        });
        c.bytes += wire;
        c.packets += segs;
        self.backlog_bytes += wire;
        self.backlog_packets += segs;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pathmodel::Thresholds;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn class(name: &str, dscp: &[u8], rate: u64, limit: u64, red: Option<RedCfg>) -> ClassCfg {
        ClassCfg {
            name: name.into(),
            dscp: dscp.to_vec(),
            rate_bps: rate,
            limit,
            red,
        }
    }

    /// Two classes on 12 Mbit/s (a 1500-byte frame takes 1 ms): best effort 99 %, the
    /// scavenger (CS1, DSCP 8) 1 %.
    fn two(limit_scav: u64, red: Option<RedCfg>) -> Sched<u64> {
        Sched::new(SchedCfg {
            rate_bps: 12_000_000,
            bytes: false,
            classes: vec![
                class("best-effort", &[], 11_880_000, 1000, None),
                class("scavenger", &[8], 120_000, limit_scav, red),
            ],
        })
    }

    /// Offers each class a 1500-byte frame every `gap[k]` (None: silent) for `secs` seconds;
    /// the bytes each class sent, and the drops of each (tail, RED).
    fn offer(s: &mut Sched<u64>, gap: [Option<Duration>; 2], secs: u64) -> ([u64; 2], [u64; 2], [u64; 2]) {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(secs);
        let mut rng = Rng::new(7);
        let mut next = [Some(t0), Some(t0)];
        let (mut sent, mut tail, mut red) = ([0u64; 2], [0u64; 2], [0u64; 2]);
        let mut departs: Vec<Instant> = vec![];
        loop {
            // The earliest arrival among the classes.
            let k = match (
                next[0].filter(|_| gap[0].is_some()),
                next[1].filter(|_| gap[1].is_some()),
            ) {
                (Some(a), Some(b)) => usize::from(b < a),
                (Some(_), None) => 0,
                (None, Some(_)) => 1,
                (None, None) => break,
            };
            let at = next[k].expect("chosen");
            if at >= end {
                break;
            }
            s.serve(at, |c, d, _| {
                sent[c] += 1500;
                departs.push(d);
            });
            let dscp = if k == 0 { 0 } else { 8 };
            match s.admit(at, 1500, 1, Some(dscp), 0, &mut rng).drop {
                None => {}
                Some(QueueDrop::Tail) => tail[k] += 1,
                Some(_) => red[k] += 1,
            }
            next[k] = Some(at + gap[k].expect("offered"));
        }
        s.serve(end, |c, d, _| {
            sent[c] += 1500;
            departs.push(d);
        });
        assert!(departs.windows(2).all(|w| w[0] <= w[1]), "departures in order");
        (sent, tail, red)
    }

    const LINE: u64 = 12_000_000 / 8;

    #[test]
    fn a_class_alone_borrows_the_whole_link() {
        // The scavenger alone, offered twice the link: it has all of it, not its 1 %.
        let (sent, tail, _) = offer(&mut two(64, None), [None, Some(Duration::from_micros(500))], 4);
        let share = sent[1] as f64 / (4 * LINE) as f64;
        assert!(
            share > 0.97 && share <= 1.001,
            "the scavenger alone had {share:.3} of the link"
        );
        assert!(tail[1] > 3000, "the rest overflowed its 64 packets: {}", tail[1]);
    }

    #[test]
    fn backlogged_together_each_class_has_its_weight() {
        // Both offered the whole link: best effort gets ~99 %, the scavenger ~1 % (never starved).
        let g = Some(Duration::from_micros(1000));
        let (sent, _, _) = offer(&mut two(64, None), [g, g], 10);
        let total = (sent[0] + sent[1]) as f64;
        let scav = sent[1] as f64 / total;
        assert!(total > 0.98 * (10 * LINE) as f64, "the link stayed busy: {total}");
        assert!(
            scav > 0.004 && scav < 0.02,
            "the scavenger's share {scav:.4} (1 % guaranteed)"
        );
    }

    #[test]
    fn an_idle_class_leaves_its_share_to_the_others() {
        // Best effort at half the link: the scavenger fills the other half.
        let (sent, _, _) = offer(
            &mut two(64, None),
            [
                Some(Duration::from_micros(2000)),
                Some(Duration::from_micros(500)),
            ],
            4,
        );
        let be = sent[0] as f64 / (4 * LINE) as f64;
        let scav = sent[1] as f64 / (4 * LINE) as f64;
        assert!(
            (0.48..=0.51).contains(&be),
            "best effort had {be:.3}, it offered 0.5"
        );
        assert!(scav > 0.47, "the scavenger took the idle half: {scav:.3}");
    }

    #[test]
    fn wred_in_a_class_drops_early_and_keeps_its_queue_below_the_limit() {
        let red = RedCfg {
            weight: 0.02,
            default: Thresholds {
                min: 10.0,
                max: 30.0,
                max_p: 0.1,
            },
            dscp: BTreeMap::new(),
        };
        let mut s = two(64, Some(red));
        let (_, tail, early) = offer(&mut s, [None, Some(Duration::from_micros(500))], 4);
        assert!(early[1] > 1000, "RED dropped the overload: {}", early[1]);
        assert_eq!(tail[1], 0, "before the 64-packet limit");
        assert!(s.avg(1) < 31.0, "its average {}", s.avg(1));
        // Drop-tail alone lets the queue reach the limit.
        let mut dt = two(64, None);
        let (_, tail, early) = offer(&mut dt, [None, Some(Duration::from_micros(500))], 4);
        assert!(tail[1] > 1000 && early[1] == 0);
    }

    #[test]
    fn a_huge_configured_limit_still_holds_no_more_than_the_element_s_memory_bound() {
        let mut s = two(u64::MAX, None);
        let t = Instant::now();
        let mut rng = Rng::new(3);
        let mut tail = 0;
        for _ in 0..2_000 {
            if s.admit(t, 65_536, 1, Some(8), 0, &mut rng).drop == Some(QueueDrop::Tail) {
                tail += 1;
            }
        }
        assert!(s.backlog().0 <= LINE_BYTES as u64, "{:?}", s.backlog());
        assert!(tail > 0);
    }

    #[test]
    fn frames_of_one_class_leave_in_order_and_unknown_dscp_goes_to_the_default() {
        let mut s = two(64, None);
        let t = Instant::now();
        let mut rng = Rng::new(1);
        for i in 0..10u64 {
            let d = if i % 2 == 0 { Some(8) } else { Some(46) };
            assert_eq!(s.admit(t, 1500, 1, d, i, &mut rng).drop, None);
        }
        assert_eq!(s.class_of(Some(46)), 0);
        assert_eq!(s.class_of(None), 0);
        assert_eq!(s.backlog(), (15_000, 10));
        let mut got: Vec<(usize, u64, Instant)> = vec![];
        s.serve(t + Duration::from_secs(1), |c, d, p| got.push((c, p, d)));
        assert_eq!(got.len(), 10);
        for c in 0..2 {
            let ps: Vec<u64> = got.iter().filter(|g| g.0 == c).map(|g| g.1).collect();
            assert!(ps.windows(2).all(|w| w[0] < w[1]), "class {c} in order: {ps:?}");
        }
        // Back to back at the link's rate: the tenth leaves 10 ms after the first started.
        assert_eq!(got[9].2 - t, Duration::from_millis(10));
        assert_eq!(s.next_start(), None);
    }
}
