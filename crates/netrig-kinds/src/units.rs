//! Parsers for sizes ("32", "16K", "1M") and durations given on the command line.

/// Parses a byte size: a whole number with an optional K, M or G suffix
/// (powers of 1024, as netperf and iperf3 read them; "KB"/"KiB" accepted).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = match lower.trim_end_matches("ib").trim_end_matches('b') {
        x if x.ends_with('k') => (&x[..x.len() - 1], 1u64 << 10),
        x if x.ends_with('m') => (&x[..x.len() - 1], 1u64 << 20),
        x if x.ends_with('g') => (&x[..x.len() - 1], 1u64 << 30),
        x => (x, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size: use a whole number of bytes with an optional K, M or G suffix, e.g. 32, 16K, 1M"))?;
    n.checked_mul(mult).ok_or_else(|| format!("{s:?} is too large"))
}

/// A size that must fit in u32 (message sizes, socket buffers).
pub fn parse_size_u32(s: &str) -> Result<u32, String> {
    let v = parse_size(s)?;
    u32::try_from(v).map_err(|_| format!("{s:?} is too large (at most 4G)"))
}

/// `--notsent-lowat`: a size, or `off` (also `0`): 0 on the wire, which
/// leaves the host's net.ipv4.tcp_notsent_lowat to the sockets.
pub fn parse_size_or_off(s: &str) -> Result<u32, String> {
    match s.trim() {
        "off" | "0" => Ok(0),
        _ => parse_size_u32(s),
    }
}

/// Seconds, fractional allowed.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('s')
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{s:?} must be a non-negative number of seconds"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32").unwrap(), 32);
        assert_eq!(parse_size("16K").unwrap(), 16384);
        assert_eq!(parse_size("16k").unwrap(), 16384);
        assert_eq!(parse_size("16KB").unwrap(), 16384);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert!(parse_size("1.5M").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
        assert!(parse_size_u32("8G").is_err());
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("1.5").unwrap(), 1.5);
        assert_eq!(parse_seconds("10s").unwrap(), 10.0);
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("inf").is_err());
    }
}
