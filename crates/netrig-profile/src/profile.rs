//! A window's samples folded into stacks of names, and what is read from them: folded-stack
//! text, the split by thread and context, the groups, the top functions, the witness.

use std::collections::HashMap;
use std::time::Duration;

use crate::groups::{classify, is_softirq, Group};
use crate::softnet::NetCounts;
use crate::witness::{StatTimes, Window, Witness};

/// One distinct stack of one process, with how often it was sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    /// The process's name (`swapper` for the idle task).
    pub comm: String,
    /// Function names, root first.
    pub frames: Vec<String>,
    pub samples: u64,
    /// The samples' periods summed: the CPU time they stand for.
    pub period_ns: u64,
    /// Sampled in one of this test's processes or threads.
    pub this_test: bool,
    /// In softirq context (a softirq entry frame is in the stack).
    pub softirq: bool,
    /// Its subsystem (groups.rs).
    pub group: Group,
}

/// Samples and CPU time of a part of the profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    pub samples: u64,
    pub period_ns: u64,
}

impl Count {
    fn add(&mut self, s: &Stack) {
        self.samples += s.samples;
        self.period_ns += s.period_ns;
    }
}

/// The split by thread and context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Split {
    pub this_test_process: Count,
    pub this_test_softirq: Count,
    pub rest_process: Count,
    pub rest_softirq: Count,
}

/// One function's samples: where it was the leaf (self) and where it was anywhere in the
/// stack (inclusive, each stack counted once however often the function recurs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionCount {
    pub name: String,
    pub self_samples: u64,
    pub inclusive_samples: u64,
}

/// A profile of every CPU over a window. Holds names and counts, never addresses.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// How long sampling was enabled.
    pub window: Duration,
    /// How many CPUs were sampled.
    pub cpus: usize,
    /// The sampling frequency asked of the kernel, per CPU.
    pub frequency_hz: u64,
    /// Every sample read, folded or not.
    pub samples: u64,
    /// Samples the kernel could not write (PERF_RECORD_LOST): the ring buffer was full.
    pub lost_samples: u64,
    /// Samples read but not folded: their stack was new once the cap on distinct stacks was
    /// reached.
    pub dropped_samples: u64,
    /// Times the kernel throttled a CPU's event (PERF_RECORD_THROTTLE): it took
    /// perf_event_max_sample_rate / HZ samples on a CPU without a tick in between, which
    /// happens on an idle CPU whose tick is stopped (NO_HZ), so its idle time is under-sampled.
    pub throttles: u64,
    /// The distinct stacks, most sampled first.
    pub stacks: Vec<Stack>,
    /// /proc/stat's times over the window (in its ticks), if read at both edges.
    pub stat: Option<StatTimes>,
    /// /proc/stat's ticks per second (USER_HZ).
    pub ticks_per_second: u64,
    /// /proc/softirqs' NET_RX and NET_TX and /proc/net/softnet_stat's counters over the
    /// window, per CPU, or why each is withheld.
    pub net: NetCounts,
}

impl Profile {
    /// Folds (comm, frames root first, this test?, samples, period) into the profile's stacks,
    /// merging equal ones and classifying each.
    pub fn fold_stacks<I>(&mut self, raw: I)
    where
        I: IntoIterator<Item = (String, Vec<String>, bool, u64, u64)>,
    {
        let mut merged: HashMap<(String, Vec<String>, bool), Count> = HashMap::new();
        for s in self.stacks.drain(..) {
            let c = merged.entry((s.comm, s.frames, s.this_test)).or_default();
            c.samples += s.samples;
            c.period_ns += s.period_ns;
        }
        for (comm, frames, ours, samples, period_ns) in raw {
            let c = merged.entry((comm, frames, ours)).or_default();
            c.samples += samples;
            c.period_ns += period_ns;
        }
        let mut stacks: Vec<Stack> = merged
            .into_iter()
            .map(|((comm, frames, this_test), c)| Stack {
                softirq: is_softirq(&frames),
                group: classify(&frames),
                comm,
                frames,
                samples: c.samples,
                period_ns: c.period_ns,
                this_test,
            })
            .collect();
        stacks.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.frames.cmp(&b.frames)));
        self.stacks = stacks;
    }

    /// Folded-stack text, a line per stack: `comm;root;...;leaf N` (the process name as the
    /// root, as stackcollapse-perf writes it), most sampled first. Semicolons inside names
    /// become colons so that the frames can be split again.
    pub fn folded(&self) -> String {
        let mut out = String::new();
        for s in &self.stacks {
            out.push_str(&s.comm.replace(';', ":"));
            for f in &s.frames {
                out.push(';');
                out.push_str(&f.replace(';', ":"));
            }
            out.push_str(&format!(" {}\n", s.samples));
        }
        out
    }

    /// The split by this test's threads against the rest of the host, softirq against process
    /// context.
    pub fn split(&self) -> Split {
        let mut split = Split::default();
        for s in &self.stacks {
            match (s.this_test, s.softirq) {
                (true, false) => split.this_test_process.add(s),
                (true, true) => split.this_test_softirq.add(s),
                (false, false) => split.rest_process.add(s),
                (false, true) => split.rest_softirq.add(s),
            }
        }
        split
    }

    /// Each group's samples, in [`Group::ALL`]'s order (groups without samples included).
    pub fn groups(&self) -> Vec<(Group, Count)> {
        let mut counts: Vec<(Group, Count)> = Group::ALL.iter().map(|g| (*g, Count::default())).collect();
        for s in &self.stacks {
            if let Some((_, c)) = counts.iter_mut().find(|(g, _)| *g == s.group) {
                c.add(s);
            }
        }
        counts
    }

    /// The `n` functions with the most inclusive samples (ties by self samples, then name).
    pub fn top_functions(&self, n: usize) -> Vec<FunctionCount> {
        let mut by_name: HashMap<&str, (u64, u64)> = HashMap::new();
        for s in &self.stacks {
            if let Some(leaf) = s.frames.last() {
                by_name.entry(leaf).or_default().0 += s.samples;
            }
            let mut seen: Vec<&str> = Vec::with_capacity(s.frames.len());
            for f in &s.frames {
                if !seen.contains(&f.as_str()) {
                    seen.push(f);
                    by_name.entry(f).or_default().1 += s.samples;
                }
            }
        }
        let mut top: Vec<FunctionCount> = by_name
            .into_iter()
            .map(|(name, (s, i))| FunctionCount {
                name: name.to_string(),
                self_samples: s,
                inclusive_samples: i,
            })
            .collect();
        top.sort_by(|a, b| {
            (b.inclusive_samples, b.self_samples)
                .cmp(&(a.inclusive_samples, a.self_samples))
                .then_with(|| a.name.cmp(&b.name))
        });
        top.truncate(n);
        top
    }

    /// The samples of every group but idle, and the CPU time they stand for.
    pub fn busy(&self) -> Count {
        let mut busy = Count::default();
        for s in self.stacks.iter().filter(|s| s.group != Group::Idle) {
            busy.add(s);
        }
        busy
    }

    /// Sampled busy time against /proc/stat's busy time over the window, judged; None where
    /// /proc/stat was not read.
    pub fn witness(&self) -> Option<Witness> {
        let window = Window {
            window_ns: u64::try_from(self.window.as_nanos()).unwrap_or(u64::MAX),
            cpus: self.cpus,
            frequency_hz: self.frequency_hz,
            ticks_per_second: self.ticks_per_second,
            lost_samples: self.lost_samples,
            throttles: self.throttles,
        };
        Some(Witness::judge(self.busy().period_ns, self.stat?, window))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(comm: &str, frames: &str, ours: bool, n: u64) -> (String, Vec<String>, bool, u64, u64) {
        let frames = frames.split(';').map(str::to_string).collect();
        (comm.to_string(), frames, ours, n, n * 1_001_001)
    }

    fn sample_profile() -> Profile {
        let mut p = Profile {
            stat: Some(StatTimes { busy: 2, steal: 0 }),
            ticks_per_second: 100,
            window: Duration::from_millis(50),
            cpus: 2,
            frequency_hz: 999,
            ..Profile::default()
        };
        let stacks = [
            (
                "netrig",
                "main;run;tcp_sendmsg;tcp_push;__tcp_transmit_skb",
                true,
                3,
            ),
            ("netrig", "main;run;tcp_sendmsg;_copy_from_iter", true, 5),
            ("netrig", "main;run;tcp_sendmsg;_copy_from_iter", true, 2),
            (
                "netrig",
                "main;run;do_softirq;net_rx_action;tcp_v4_rcv;tcp_v4_rcv",
                true,
                4,
            ),
            ("sshd", "main;tcp_sendmsg;tcp_push", false, 1),
            ("swapper", "cpu_startup_entry;do_idle;default_idle", false, 6),
        ];
        p.fold_stacks(stacks.map(|(c, f, ours, n)| raw(c, f, ours, n)));
        p
    }

    #[test]
    fn folding_merges_equal_stacks_root_first() {
        let p = sample_profile();
        assert_eq!(p.stacks.len(), 5);
        assert_eq!(p.stacks[0].samples, 7, "the two copy stacks merged");
        assert_eq!(p.stacks[0].period_ns, 7 * 1_001_001);
        let text = p.folded();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "netrig;main;run;tcp_sendmsg;_copy_from_iter 7");
        assert_eq!(lines[1], "swapper;cpu_startup_entry;do_idle;default_idle 6");
        assert!(lines.contains(&"sshd;main;tcp_sendmsg;tcp_push 1"));
        let total: u64 = lines
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 21);
    }

    #[test]
    fn split_groups_and_top_functions() {
        let p = sample_profile();
        let split = p.split();
        assert_eq!(split.this_test_process.samples, 10);
        assert_eq!(split.this_test_softirq.samples, 4);
        assert_eq!(split.rest_process.samples, 7);
        assert_eq!(split.rest_softirq.samples, 0);
        let groups = p.groups();
        let of = |g: Group| groups.iter().find(|(x, _)| *x == g).unwrap().1.samples;
        assert_eq!(of(Group::MemoryCopy), 7);
        assert_eq!(of(Group::Tcp), 3 + 4 + 1);
        assert_eq!(of(Group::Idle), 6);
        assert_eq!(groups.iter().map(|(_, c)| c.samples).sum::<u64>(), 21);
        let top = p.top_functions(3);
        assert_eq!(
            top[0],
            FunctionCount {
                name: "main".into(),
                self_samples: 0,
                inclusive_samples: 15
            }
        );
        assert_eq!(top[1].name, "run");
        assert_eq!(
            top[2],
            FunctionCount {
                name: "tcp_sendmsg".into(),
                self_samples: 0,
                inclusive_samples: 11
            }
        );
        let rcv = p
            .top_functions(100)
            .into_iter()
            .find(|f| f.name == "tcp_v4_rcv")
            .unwrap();
        assert_eq!(
            (rcv.self_samples, rcv.inclusive_samples),
            (4, 4),
            "a recursion counts once"
        );
    }

    #[test]
    fn witness_counts_busy_samples_only() {
        let p = sample_profile();
        assert_eq!(
            p.busy(),
            Count {
                samples: 15,
                period_ns: 15 * 1_001_001
            }
        );
        let w = p.witness().unwrap();
        assert_eq!(w.stat_busy_ns, 20_000_000);
        assert!((w.ratio.unwrap() - 15.0 * 1_001_001.0 / 20e6).abs() < 1e-12);
        // 20 ms of busy ticks over 50 ms on 2 CPUs resolve nothing.
        assert_eq!(w.verdict, crate::witness::Verdict::Unresolved);
        assert_eq!(Profile::default().witness(), None);
    }
}
