//! A call chain of addresses into a stack of names, root first. Kernel addresses are named
//! from /proc/kallsyms, this process's own from its ELF symbols; any other user-space frame is
//! "[unknown] (comm)". The addresses end here: nothing after this holds them.

use std::collections::HashMap;

use crate::kallsyms::Kallsyms;
use crate::selfsyms::SelfSyms;
use crate::sys::{PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER};

/// The symbol tables and the process names seen so far.
pub(crate) struct Symbols {
    pub kallsyms: Kallsyms,
    pub own: SelfSyms,
    pub own_pid: u32,
    comms: HashMap<u32, String>,
}

/// Where the addresses that follow a context marker are.
#[derive(Clone, Copy, PartialEq)]
enum Space {
    Kernel,
    User,
    Other,
}

impl Symbols {
    pub(crate) fn new(kallsyms: Kallsyms, own: SelfSyms) -> Symbols {
        Symbols {
            kallsyms,
            own,
            own_pid: std::process::id(),
            comms: HashMap::new(),
        }
    }

    /// The name of process `pid`: `swapper` for the idle task, else /proc/PID/comm, else
    /// `pid N` (a process that has exited).
    pub(crate) fn comm(&mut self, pid: u32) -> String {
        if pid == 0 {
            return "swapper".to_string();
        }
        self.comms
            .entry(pid)
            .or_insert_with(|| match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                Ok(c) => c.trim().to_string(),
                Err(_) => format!("pid {pid}"),
            })
            .clone()
    }

    /// The names of a call chain given leaf first (with the kernel's context markers), root
    /// first. Runs of unnamed user frames of one process are kept as one frame: without frame
    /// pointers their chain is guesswork.
    pub(crate) fn frames(&mut self, pid: u32, chain: &[u64]) -> Vec<String> {
        let comm = self.comm(pid);
        let unknown = format!("[unknown] ({comm})");
        let mut space = Space::Kernel;
        let mut out: Vec<String> = Vec::with_capacity(chain.len());
        for &addr in chain {
            if addr >= PERF_CONTEXT_MAX {
                space = match addr {
                    PERF_CONTEXT_KERNEL => Space::Kernel,
                    PERF_CONTEXT_USER => Space::User,
                    _ => Space::Other,
                };
                continue;
            }
            let name = match space {
                Space::Kernel => self
                    .kallsyms
                    .lookup(addr)
                    .unwrap_or_else(|| "[unknown kernel]".into()),
                Space::User if pid == self.own_pid && self.own.contains(addr) => self
                    .own
                    .lookup(addr)
                    .map(str::to_string)
                    .unwrap_or_else(|| unknown.clone()),
                _ => unknown.clone(),
            };
            if !(name == unknown && out.last() == Some(&unknown)) {
                out.push(name);
            }
        }
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_become_names_root_first() {
        let k = Kallsyms::parse("ffffffff81001000 T tcp_sendmsg\nffffffff81002000 T _copy_from_iter\n");
        let mut s = Symbols::new(k, SelfSyms::default());
        let chain = [
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_2010,
            0xffff_ffff_8100_1010,
            PERF_CONTEXT_USER,
            0x5555_0000,
            0x5555_0100,
            0x5555_0200,
        ];
        // pid 0 is never this process: its user frames are unknown, collapsed into one.
        let frames = s.frames(0, &chain);
        assert_eq!(
            frames,
            vec!["[unknown] (swapper)", "tcp_sendmsg", "_copy_from_iter"]
        );
    }
}
