//! This process's own functions, named from its own ELF symbol table (/proc/self/exe), placed
//! where the loader put them (the load bias from /proc/self/maps), demangled with
//! rustc-demangle. Frames in shared libraries or the vDSO are not named here.

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// This executable's function symbols, at their run-time addresses, sorted.
#[derive(Debug, Default)]
pub struct SelfSyms {
    /// (start, end, demangled name), sorted by start.
    funcs: Vec<(u64, u64, String)>,
    /// The run-time address ranges of the executable's own mappings.
    ranges: Vec<(u64, u64)>,
}

impl SelfSyms {
    /// Reads /proc/self/exe's symbols and /proc/self/maps. Empty where either cannot be read
    /// (a stripped binary names nothing: its frames become "[unknown] (comm)").
    pub fn load() -> SelfSyms {
        let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
            return SelfSyms::default();
        };
        let (Ok(data), Ok(maps)) = (std::fs::read(&exe), std::fs::read_to_string("/proc/self/maps")) else {
            return SelfSyms::default();
        };
        let ranges = exe_ranges(&maps, &exe.to_string_lossy());
        let Ok(file) = object::File::parse(&*data) else {
            return SelfSyms::default();
        };
        // The bias: where the mapping of file offset 0 starts, less the page of the lowest
        // loaded address (0 in a position-independent executable: the bias is then the start).
        let lowest = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
        let Some(start) = maps_offset0_start(&maps, &exe.to_string_lossy()) else {
            return SelfSyms::default();
        };
        let bias = start.wrapping_sub(lowest);
        let mut funcs: Vec<(u64, u64, String)> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| {
                let name = s.name().ok()?;
                let at = s.address().wrapping_add(bias);
                Some((
                    at,
                    at + s.size().max(1),
                    format!("{:#}", rustc_demangle::demangle(name)),
                ))
            })
            .collect();
        funcs.sort_by_key(|f| f.0);
        SelfSyms { funcs, ranges }
    }

    /// True where `addr` is inside this executable's own mappings.
    pub fn contains(&self, addr: u64) -> bool {
        self.ranges.iter().any(|&(a, b)| (a..b).contains(&addr))
    }

    /// The demangled name of the function holding `addr`, if a symbol covers it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.funcs.partition_point(|f| f.0 <= addr);
        let f = self.funcs.get(i.checked_sub(1)?)?;
        (addr < f.1).then_some(f.2.as_str())
    }
}

/// The address ranges of the mappings of `path` in maps text.
fn exe_ranges(maps: &str, path: &str) -> Vec<(u64, u64)> {
    maps.lines()
        .filter(|l| l.ends_with(path))
        .filter_map(|l| parse_range(l.split_whitespace().next()?))
        .collect()
}

/// The start of the mapping of `path` at file offset 0.
fn maps_offset0_start(maps: &str, path: &str) -> Option<u64> {
    maps.lines().filter(|l| l.ends_with(path)).find_map(|l| {
        let mut f = l.split_whitespace();
        let range = parse_range(f.next()?)?;
        let offset = u64::from_str_radix(f.nth(1)?, 16).ok()?;
        (offset == 0).then_some(range.0)
    })
}

fn parse_range(s: &str) -> Option<(u64, u64)> {
    let (a, b) = s.split_once('-')?;
    Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn a_function_of_this_test() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn maps_are_parsed() {
        let maps = "\
5581a000-5581b000 r--p 00000000 08:01 123 /usr/bin/x
5581b000-5581c000 r-xp 00001000 08:01 123 /usr/bin/x
7f00-7f10 r-xp 00000000 08:01 9 /lib/libc.so.6
";
        assert_eq!(maps_offset0_start(maps, "/usr/bin/x"), Some(0x5581a000));
        assert_eq!(
            exe_ranges(maps, "/usr/bin/x"),
            vec![(0x5581a000, 0x5581b000), (0x5581b000, 0x5581c000)]
        );
    }

    #[test]
    fn names_its_own_function() {
        let s = SelfSyms::load();
        let addr = a_function_of_this_test as *const () as u64;
        assert!(
            s.contains(addr),
            "a function of the test binary is in its mappings"
        );
        let name = s.lookup(addr + 1).expect("the test binary has its symbols");
        assert!(name.ends_with("a_function_of_this_test"), "{name}");
        assert_eq!(a_function_of_this_test(), 42);
    }
}
