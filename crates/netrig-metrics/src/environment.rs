//! A description of the machine a test ran on: kernel, CPUs, networking
//! sysctls, virtualisation. Collected once per test so results can be
//! interpreted (and compared) later.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Networking sysctls recorded in [`Environment::sysctls`].
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_congestion_control",
    "net.core.somaxconn",
    "net.ipv4.tcp_available_congestion_control",
    "net.core.netdev_max_backlog",
    "net.ipv4.tcp_mem",
];

/// The test machine, as far as it can be determined. Missing pieces are
/// `None` or empty, never an error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Host name (`uname` nodename).
    pub hostname: String,
    /// Kernel release (`uname -r`), e.g. `"6.8.0-45-generic"`.
    pub kernel: String,
    /// Kernel version string (`uname -v`), e.g. `"#45-Ubuntu SMP ..."`.
    pub kernel_version: String,
    /// Machine architecture (`uname -m`), e.g. `"x86_64"`.
    pub arch: String,
    /// First `model name` from `/proc/cpuinfo` (absent on some non-x86
    /// architectures).
    pub cpu_model: Option<String>,
    /// CPUs online (`sysconf(_SC_NPROCESSORS_ONLN)`, else the number of
    /// `cpuN` lines in `/proc/stat`; 0 if neither is available).
    pub cpus_online: u32,
    /// Networking sysctls from [`SYSCTLS`], whitespace-normalised (runs of
    /// spaces/tabs become one space); unreadable ones are omitted.
    pub sysctls: BTreeMap<String, String>,
    /// Percentage of all CPU time since boot stolen by the hypervisor
    /// (`steal / total` of the aggregate `/proc/stat` line × 100).
    pub steal_pct_since_boot: Option<f64>,
    /// `Some("hypervisor")` when `/proc/cpuinfo` flags include `hypervisor`
    /// (x86 guests), otherwise `None` (bare metal, or not detectable).
    pub virtualization: Option<String>,
}

/// Reads a sysctl by its dotted name, e.g. `"net.core.rmem_max"` →
/// `/proc/sys/net/core/rmem_max`, whitespace-normalised. `None` if the name
/// is malformed (empty components, `/`, `..`) or the file cannot be read.
///
/// Dots always become slashes, so keys whose components themselves contain
/// dots (e.g. VLAN interface names in `net.ipv4.conf.eth0.100.*`) cannot be
/// addressed.
pub fn read_sysctl(name: &str) -> Option<String> {
    if name.is_empty() || name.contains('/') || name.contains('\0') || name.split('.').any(|c| c.is_empty()) {
        return None;
    }
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    let text = std::fs::read_to_string(path).ok()?;
    Some(normalize_whitespace(&text))
}

/// First number of a sysctl, e.g. `sysctl_u64("net.core.rmem_max")` or the
/// minimum of `net.ipv4.tcp_rmem`. `None` if unreadable or not a number.
pub fn sysctl_u64(name: &str) -> Option<u64> {
    read_sysctl(name)?.split_whitespace().next()?.parse().ok()
}

fn normalize_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// First `model name` value in `/proc/cpuinfo` text.
fn cpuinfo_model(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name")
            .then(|| normalize_whitespace(value))
            .filter(|v| !v.is_empty())
    })
}

/// Whether any `flags` line of `/proc/cpuinfo` text has the `hypervisor`
/// flag.
fn cpuinfo_has_hypervisor(text: &str) -> bool {
    text.lines().any(|line| {
        line.split_once(':').is_some_and(|(key, value)| {
            key.trim() == "flags" && value.split_whitespace().any(|f| f == "hypervisor")
        })
    })
}

fn steal_pct(snapshot: &crate::CpuSnapshot) -> Option<f64> {
    let total = snapshot.total.total();
    (total > 0).then(|| snapshot.total.steal as f64 * 100.0 / total as f64)
}

/// Converts a NUL-terminated `c_char` array to a `String` without reading
/// past its end.
fn c_chars_to_string(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

struct Uname {
    nodename: String,
    release: String,
    version: String,
    machine: String,
}

fn uname() -> Option<Uname> {
    // SAFETY: utsname is plain old data; all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    Some(Uname {
        nodename: c_chars_to_string(&u.nodename),
        release: c_chars_to_string(&u.release),
        version: c_chars_to_string(&u.version),
        machine: c_chars_to_string(&u.machine),
    })
}

/// Collects the [`Environment`] of this machine. Never fails: anything that
/// cannot be read is left `None`/empty.
pub fn collect() -> Environment {
    let un = uname();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let stat = crate::read_proc_stat().ok();
    // SAFETY: sysconf has no memory-safety preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let cpus_online = if online > 0 {
        u32::try_from(online).unwrap_or(u32::MAX)
    } else {
        stat.as_ref()
            .map_or(0, |s| u32::try_from(s.per_cpu.len()).unwrap_or(u32::MAX))
    };
    let sysctls = SYSCTLS
        .iter()
        .filter_map(|name| read_sysctl(name).map(|v| (name.to_string(), v)))
        .collect();
    Environment {
        hostname: un.as_ref().map(|u| u.nodename.clone()).unwrap_or_default(),
        kernel: un.as_ref().map(|u| u.release.clone()).unwrap_or_default(),
        kernel_version: un.as_ref().map(|u| u.version.clone()).unwrap_or_default(),
        arch: un.as_ref().map(|u| u.machine.clone()).unwrap_or_default(),
        cpu_model: cpuinfo_model(&cpuinfo),
        cpus_online,
        sysctls,
        steal_pct_since_boot: stat.as_ref().and_then(steal_pct),
        virtualization: cpuinfo_has_hypervisor(&cpuinfo).then(|| "hypervisor".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO_X86_GUEST: &str = "\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz
stepping\t: 7
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm
bugs\t\t: spectre_v1 spectre_v2

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz
flags\t\t: fpu vme de pse tsc hypervisor
";

    const CPUINFO_X86_METAL: &str = "\
processor\t: 0
model name\t: AMD EPYC 7763 64-Core Processor
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr svm extapic
";

    const CPUINFO_ARM: &str = "\
processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics
CPU implementer\t: 0x41
CPU part\t: 0xd0c
";

    #[test]
    fn cpuinfo_parsing() {
        assert_eq!(
            cpuinfo_model(CPUINFO_X86_GUEST).as_deref(),
            Some("Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz")
        );
        assert!(cpuinfo_has_hypervisor(CPUINFO_X86_GUEST));
        assert_eq!(
            cpuinfo_model(CPUINFO_X86_METAL).as_deref(),
            Some("AMD EPYC 7763 64-Core Processor")
        );
        assert!(!cpuinfo_has_hypervisor(CPUINFO_X86_METAL));
        assert_eq!(cpuinfo_model(CPUINFO_ARM), None);
        assert!(!cpuinfo_has_hypervisor(CPUINFO_ARM));
        assert_eq!(cpuinfo_model(""), None);
        assert_eq!(cpuinfo_model("model name\t:   \n"), None);
        // "hypervisor" must be a whole flag, in a flags line.
        assert!(!cpuinfo_has_hypervisor("flags : nohypervisor\n"));
        assert!(!cpuinfo_has_hypervisor("power management: hypervisor\n"));
    }

    #[test]
    fn whitespace_normalisation() {
        assert_eq!(
            normalize_whitespace("4096\t131072\t6291456\n"),
            "4096 131072 6291456"
        );
        assert_eq!(normalize_whitespace("  cubic  \n"), "cubic");
        assert_eq!(normalize_whitespace(""), "");
    }

    #[test]
    fn steal_from_stat() {
        let s = crate::parse_proc_stat("cpu  100 0 100 700 0 0 0 100 50 0\n").unwrap();
        assert!((steal_pct(&s).unwrap() - 10.0).abs() < 1e-9);
        let s = crate::parse_proc_stat("cpu  0 0 0 0\n").unwrap();
        assert_eq!(steal_pct(&s), None);
    }

    #[test]
    fn sysctl_names() {
        assert_eq!(read_sysctl(""), None);
        assert_eq!(read_sysctl("net..core"), None);
        assert_eq!(read_sysctl("net/core/rmem_max"), None);
        assert_eq!(read_sysctl("../../etc/passwd"), None);
        assert_eq!(read_sysctl("net.core.no_such_sysctl_xyz"), None);
        assert_eq!(sysctl_u64("net.core.no_such_sysctl_xyz"), None);
        // Present on any Linux with networking.
        let v = read_sysctl("net.ipv4.tcp_rmem").unwrap();
        assert_eq!(v.split(' ').count(), 3, "{v:?}");
        assert!(sysctl_u64("net.ipv4.tcp_rmem").unwrap() > 0);
        assert!(sysctl_u64("net.core.somaxconn").unwrap() > 0);
        assert_eq!(sysctl_u64("net.ipv4.tcp_congestion_control"), None);
    }

    #[test]
    fn collect_this_machine() {
        let env = collect();
        assert!(!env.kernel.is_empty());
        assert!(!env.arch.is_empty());
        assert!(env.cpus_online >= 1);
        assert!(env
            .steal_pct_since_boot
            .is_some_and(|p| (0.0..=100.0).contains(&p)));
        if let Some(cc) = env.sysctls.get("net.ipv4.tcp_congestion_control") {
            assert!(!cc.is_empty() && !cc.contains(char::is_whitespace));
        }
        for v in env.sysctls.values() {
            assert!(!v.contains('\n') && !v.contains('\t') && !v.contains("  "));
        }
        let j = serde_json::to_string(&env).unwrap();
        let mut back: Environment = serde_json::from_str(&j).unwrap();
        // JSON float parsing may differ in the last bit; compare the rest exactly.
        let (a, b) = (env.steal_pct_since_boot, back.steal_pct_since_boot);
        assert!((a.unwrap() - b.unwrap()).abs() < 1e-9);
        back.steal_pct_since_boot = env.steal_pct_since_boot;
        assert_eq!(back, env);
    }
}
