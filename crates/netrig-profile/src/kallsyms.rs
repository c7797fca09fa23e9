//! Kernel symbols from /proc/kallsyms: parsed once, sorted by address, looked up by binary
//! search. Only text symbols are kept (types t/T/w/W): a sampled instruction pointer is code.

/// One kernel function: where it starts, its name and the module it is in (none for the core
/// kernel).
#[derive(Debug, Clone, PartialEq, Eq)]
struct KSym {
    addr: u64,
    name: String,
    module: Option<String>,
}

/// The kernel's text symbols, sorted by address.
#[derive(Debug, Default)]
pub struct Kallsyms {
    syms: Vec<KSym>,
}

/// No more lines than this are read: a kernel with every module loaded has about 200,000.
const MAX_LINES: usize = 2_000_000;

impl Kallsyms {
    /// Reads /proc/kallsyms. An empty table where it cannot be read.
    pub fn load() -> std::io::Result<Kallsyms> {
        Ok(Kallsyms::parse(&std::fs::read_to_string("/proc/kallsyms")?))
    }

    /// Parses kallsyms text: `ffffffff81000000 T _text` or `ffffffffc0a01000 t fn\t[module]`.
    /// Lines that do not parse are skipped.
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms = Vec::new();
        for line in text.lines().take(MAX_LINES) {
            let mut fields = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next()) else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            let module = fields
                .next()
                .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string());
            syms.push(KSym {
                addr,
                name: name.to_string(),
                module,
            });
        }
        syms.sort_by_key(|s| s.addr);
        Kallsyms { syms }
    }

    /// True where addresses are hidden: every address read as zero (kptr_restrict, or a reader
    /// without CAP_SYSLOG), or nothing at all was read.
    pub fn hidden(&self) -> bool {
        self.syms.iter().all(|s| s.addr == 0)
    }

    /// How many text symbols were read.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True where no symbol was read.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The name of the function holding `addr`, with its module in brackets (`fn [module]`), or
    /// None below the first symbol. Past the last symbol the last one is named: kallsyms gives
    /// no sizes, and the last text symbol of the core kernel is followed by non-text ones.
    pub fn lookup(&self, addr: u64) -> Option<String> {
        if self.hidden() {
            return None;
        }
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        Some(match &s.module {
            Some(m) => format!("{} [{m}]", s.name),
            None => s.name.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ffffffff81000000 T _text
ffffffff81001000 T tcp_sendmsg
ffffffff81002000 t tcp_sendmsg_locked
ffffffff81003000 D some_data
ffffffff81004000 W weak_fn
ffffffffc0a01000 t nft_do_chain\t[nf_tables]
ffffffffc0a00000 t veth_xmit\t[veth]
garbage line
";

    #[test]
    fn parses_text_symbols_sorted_with_modules() {
        let k = Kallsyms::parse(SAMPLE);
        assert_eq!(k.len(), 6, "the data symbol and the garbage are skipped");
        assert!(!k.hidden());
        assert_eq!(k.lookup(0xffffffff81001000).as_deref(), Some("tcp_sendmsg"));
        assert_eq!(k.lookup(0xffffffff81001fff).as_deref(), Some("tcp_sendmsg"));
        assert_eq!(
            k.lookup(0xffffffff81002010).as_deref(),
            Some("tcp_sendmsg_locked")
        );
        // The data symbol at ...3000 is not text: its address belongs to the previous function.
        assert_eq!(
            k.lookup(0xffffffff81003010).as_deref(),
            Some("tcp_sendmsg_locked")
        );
        assert_eq!(k.lookup(0xffffffff81004001).as_deref(), Some("weak_fn"));
        // Sorted although the file lists veth after nf_tables.
        assert_eq!(k.lookup(0xffffffffc0a00010).as_deref(), Some("veth_xmit [veth]"));
        assert_eq!(
            k.lookup(0xffffffffc0a01010).as_deref(),
            Some("nft_do_chain [nf_tables]")
        );
        assert_eq!(k.lookup(0x1000), None, "below the first symbol");
    }

    #[test]
    fn zero_addresses_are_hidden() {
        let k = Kallsyms::parse("0000000000000000 T _text\n0000000000000000 T tcp_sendmsg\n");
        assert!(k.hidden());
        assert_eq!(k.lookup(0xffffffff81001000), None);
        assert!(Kallsyms::parse("").hidden());
    }

    #[test]
    fn this_hosts_kallsyms_names_tcp_sendmsg() {
        let Ok(k) = Kallsyms::load() else {
            eprintln!("skipped: /proc/kallsyms is not readable here");
            return;
        };
        if k.hidden() {
            eprintln!("skipped: /proc/kallsyms hides addresses here (kptr_restrict)");
            return;
        }
        let addr = k.syms.iter().find(|s| s.name == "tcp_sendmsg").map(|s| s.addr);
        let addr = addr.expect("a kernel with TCP has tcp_sendmsg");
        assert_eq!(k.lookup(addr + 4).as_deref(), Some("tcp_sendmsg"));
    }
}
