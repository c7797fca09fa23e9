//! Sweeps: an option's list of values, and every combination of several.
//!
//! A value list is written as netperf users loop by hand:
//! - `32,64,128` — these values, in this order;
//! - `1..8` — every whole number from 1 to 8;
//! - `100..2000:100` — from 100 to 2000 in steps of 100;
//! - `64K..1M*2` — from 64K, multiplying by 2, up to 1M.
//!
//! Values keep their suffixes (`64K`, `1M`): each is handed to the kind's
//! own option parser as if typed, so a swept point is exactly the test a
//! single run with that value is.
//!
//! Options swept together: an option written `-s,-S` (a plan's `sweep = { "-s,-S" =
//! "64K..1M*2" }`) gives each of them the same value at every point, as netperf's
//! `-s 64K -S 64K` loops set both ends' buffers — one sweep, not the cross product of two.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Most points one sweep (or all its combinations) may have.
pub const MAX_POINTS: usize = 10_000;

/// A sweep that cannot be read, naming the option and the text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{option} {text:?}: {why}")]
pub struct SweepError {
    pub option: String,
    pub text: String,
    pub why: String,
}

/// One swept option and its values, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// The option as typed, e.g. `-m` or `--rate`; several swept together as one,
    /// comma-separated (`-s,-S`: both set to each value).
    pub option: String,
    pub values: Vec<String>,
}

/// Whether `text` is a list or a range rather than one value.
pub fn is_sweep(text: &str) -> bool {
    text.contains(',') || text.contains("..")
}

/// A number with an optional K/M/G suffix, as the options take them: the
/// suffix's multiplier is 1024-based for sizes (`size`) and 1000-based for
/// rates, as the options themselves read them.
fn number(text: &str, size: bool) -> Option<(f64, String)> {
    let t = text.trim();
    let (num, suffix) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&t[..i], &t[i..]),
        None => (t, ""),
    };
    let base: f64 = if size { 1024.0 } else { 1000.0 };
    let mult = match suffix
        .to_ascii_lowercase()
        .trim_end_matches("ib")
        .trim_end_matches('b')
    {
        "" => 1.0,
        "k" => base,
        "m" => base * base,
        "g" => base * base * base,
        _ => return None,
    };
    let v: f64 = num.parse().ok()?;
    v.is_finite().then_some((v * mult, suffix.to_string()))
}

/// Writes `v` back in the unit of `suffix` when it divides evenly, else as a plain number.
fn write_back(v: f64, suffix: &str, size: bool) -> String {
    let base: f64 = if size { 1024.0 } else { 1000.0 };
    let mult = match suffix.to_ascii_lowercase().chars().next() {
        Some('k') => base,
        Some('m') => base * base,
        Some('g') => base * base * base,
        _ => 1.0,
    };
    let scaled = v / mult;
    if mult > 1.0 && (scaled - scaled.round()).abs() < 1e-9 {
        format!("{}{}", scaled.round() as u64, &suffix[..1])
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as u64)
    } else {
        format!("{v}")
    }
}

/// A swept value as a number, read as its option reads it: "64K" of `-m`
/// is 65536, "10M" of `-b` is 10^7.
pub fn value(option: &str, text: &str) -> Option<f64> {
    number(text, is_size_option(option)).map(|(v, _)| v)
}

/// The options a sweep's `option` sets: one, or several swept together (`-s,-S`).
pub fn options(option: &str) -> impl Iterator<Item = &str> {
    option.split(',').map(str::trim)
}

/// Options whose K/M/G are powers of 1024 (sizes); others' are powers of
/// 1000 (rates: `-b`, `--max-pacing-rate`) or have none. Options swept together are
/// sizes when every one of them is.
fn is_size_option(option: &str) -> bool {
    options(option).all(is_one_size_option)
}

fn is_one_size_option(option: &str) -> bool {
    matches!(
        option,
        "-m" | "--message-size"
            | "-M"
            | "--recv-size"
            | "-s"
            | "--local-sockbuf"
            | "-S"
            | "--remote-sockbuf"
            | "-n"
            | "--bytes"
    )
}

/// Reads `text` as `option`'s list of values.
pub fn parse(option: &str, text: &str) -> Result<Sweep, SweepError> {
    let err = |why: &str| SweepError {
        option: option.to_string(),
        text: text.to_string(),
        why: why.to_string(),
    };
    let size = is_size_option(option);
    let values: Vec<String> = if let Some((from, rest)) = text.split_once("..") {
        let (to, step) = match rest.split_once(['*', ':']) {
            Some((to, step)) => (to, Some((rest.as_bytes()[to.len()] == b'*', step))),
            None => (rest, None),
        };
        let (a, sa) = number(from, size).ok_or_else(|| err("the start is not a number"))?;
        let (b, _) = number(to, size).ok_or_else(|| err("the end is not a number"))?;
        if a > b {
            return Err(err("the range runs downwards: write it from the smaller value"));
        }
        let mut out = Vec::new();
        let mut v = a;
        match step {
            Some((true, f)) => {
                let f: f64 = f.parse().map_err(|_| err("the factor after * is not a number"))?;
                if !(f.is_finite() && f > 1.0) {
                    return Err(err("the factor after * must be more than 1"));
                }
                if a <= 0.0 {
                    return Err(err("a range multiplied by a factor must start above 0"));
                }
                while v <= b * (1.0 + 1e-12) {
                    out.push(write_back(v, &sa, size));
                    v *= f;
                    if out.len() > MAX_POINTS {
                        return Err(err(&format!("more than {MAX_POINTS} values")));
                    }
                }
            }
            step => {
                let s = match step {
                    Some((_, s)) => {
                        number(s, size)
                            .ok_or_else(|| err("the step after : is not a number"))?
                            .0
                    }
                    None => 1.0,
                };
                if !(s.is_finite() && s > 0.0) {
                    return Err(err("the step after : must be more than 0"));
                }
                let n = ((b - a) / s).floor() as usize + 1;
                if n > MAX_POINTS {
                    return Err(err(&format!("more than {MAX_POINTS} values")));
                }
                for i in 0..n {
                    v = a + s * i as f64;
                    out.push(write_back(v, &sa, size));
                }
            }
        }
        out
    } else {
        text.split(',').map(|v| v.trim().to_string()).collect()
    };
    if values.iter().any(String::is_empty) {
        return Err(err("an empty value in the list"));
    }
    if values.len() > MAX_POINTS {
        return Err(err(&format!("more than {MAX_POINTS} values")));
    }
    Ok(Sweep {
        option: option.to_string(),
        values,
    })
}

/// One point of a sweep: a value for each swept option, in the sweeps' order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub values: Vec<(String, String)>,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.values.is_empty() {
            return f.write_str("(no sweep)");
        }
        let parts: Vec<String> = self.values.iter().map(|(o, v)| format!("{o} {v}")).collect();
        f.write_str(&parts.join(" "))
    }
}

impl Point {
    /// `args` with each swept option's value set: replaced where the option
    /// is given, appended where it is not (each of options swept together).
    pub fn apply(&self, args: &[String]) -> Vec<String> {
        let mut out = args.to_vec();
        for (joint, value) in &self.values {
            for option in options(joint) {
                match out.iter().position(|a| a == option) {
                    Some(i) if i + 1 < out.len() => out[i + 1] = value.clone(),
                    _ => {
                        out.push(option.to_string());
                        out.push(value.clone());
                    }
                }
            }
        }
        out
    }
}

/// Every combination of the sweeps' values, the first sweep varying slowest
/// (the order they were given in). An option swept twice (alone or among options swept
/// together) is an error naming it.
pub fn points(sweeps: &[Sweep]) -> Result<Vec<Point>, SweepError> {
    let mut seen: Vec<&str> = Vec::new();
    for s in sweeps {
        for o in options(&s.option) {
            let why = if o.is_empty() {
                "an empty option among options swept together (write them as \"-s,-S\")"
            } else if seen.contains(&o) {
                "this option is swept twice (alone or among options swept together)"
            } else {
                ""
            };
            if !why.is_empty() {
                return Err(SweepError {
                    option: s.option.clone(),
                    text: o.to_string(),
                    why: why.into(),
                });
            }
            seen.push(o);
        }
    }
    let total = sweeps.iter().try_fold(1usize, |n, s| {
        n.checked_mul(s.values.len()).filter(|n| *n <= MAX_POINTS)
    });
    let Some(total) = total else {
        let s = &sweeps[0];
        return Err(SweepError {
            option: s.option.clone(),
            text: String::new(),
            why: format!("the sweeps combine to more than {MAX_POINTS} points"),
        });
    };
    let mut out = Vec::with_capacity(total);
    for mut i in 0..total {
        let mut values = vec![(String::new(), String::new()); sweeps.len()];
        for (k, s) in sweeps.iter().enumerate().rev() {
            let n = s.values.len();
            values[k] = (s.option.clone(), s.values[i % n].clone());
            i /= n;
        }
        out.push(Point { values });
    }
    Ok(out)
}

/// Finds the swept options in a test's arguments (`args` after the kind's
/// name): an option of `sweepable` whose value is a list or a range. The
/// arguments come back with each swept value removed and the sweeps in the
/// order they were given.
pub fn split_args(args: &[String], sweepable: &[&str]) -> Result<(Vec<String>, Vec<Sweep>), SweepError> {
    let mut rest = Vec::with_capacity(args.len());
    let mut sweeps = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        // --opt=value
        if let Some((opt, val)) = a.split_once('=').filter(|(o, _)| o.starts_with("--")) {
            if sweepable.contains(&opt) && is_sweep(val) {
                sweeps.push(parse(opt, val)?);
                i += 1;
                continue;
            }
        }
        if sweepable.contains(&a.as_str()) && i + 1 < args.len() && is_sweep(&args[i + 1]) {
            sweeps.push(parse(a, &args[i + 1])?);
            i += 2;
            continue;
        }
        rest.push(a.clone());
        i += 1;
    }
    Ok((rest, sweeps))
}

/// The options a sweep may vary from the command line: the single numeric
/// ones. (`-r REQ,RESP` and `--cpus 0,2` use commas themselves: sweep them
/// in a plan file, whose values are a list.)
pub const SWEEPABLE: &[&str] = &[
    "-l",
    "--length",
    "-m",
    "--message-size",
    "-M",
    "--recv-size",
    "-s",
    "--local-sockbuf",
    "-S",
    "--remote-sockbuf",
    "-P",
    "--parallel",
    "-T",
    "--workers",
    "-b",
    "--bitrate",
    "--pacing-us",
    "--rate",
    "--burst",
    "--spin-us",
    "--timeout",
    "-n",
    "--bytes",
    "--dscp",
    "--tos",
    "--priority",
    "--mss",
    "--max-pacing-rate",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(option: &str, text: &str) -> Vec<String> {
        parse(option, text).unwrap().values
    }

    #[test]
    fn lists_and_ranges() {
        assert_eq!(vals("-m", "32,64,128"), ["32", "64", "128"]);
        assert_eq!(vals("-P", "1..4"), ["1", "2", "3", "4"]);
        assert_eq!(
            vals("--rate", "100..500:100"),
            ["100", "200", "300", "400", "500"]
        );
        assert_eq!(vals("--rate", "100..2000:100").len(), 20);
        assert_eq!(vals("-s", "64K..1M*2"), ["64K", "128K", "256K", "512K", "1024K"]);
        assert_eq!(vals("-b", "100M..1G*10"), ["100M", "1000M"]);
        assert_eq!(vals("-m", "1K..4K:1K"), ["1K", "2K", "3K", "4K"]);
    }

    #[test]
    fn bad_sweeps_name_the_option() {
        for (o, t) in [
            ("-m", "8..1"),
            ("-m", "1..x"),
            ("-s", "0..1M*2"),
            ("-P", "1..4:0"),
            ("-m", "1,,2"),
            ("-P", "1..100000"),
        ] {
            let e = parse(o, t).unwrap_err();
            assert_eq!(e.option, o);
            assert!(e.to_string().starts_with(&format!("{o} ")), "{e}");
        }
    }

    #[test]
    fn combinations_vary_the_last_fastest() {
        let s = [parse("-m", "1,2").unwrap(), parse("-P", "1..3").unwrap()];
        let p = points(&s).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(p[0].to_string(), "-m 1 -P 1");
        assert_eq!(p[2].to_string(), "-m 1 -P 3");
        assert_eq!(p[3].to_string(), "-m 2 -P 1");
        assert_eq!(points(&[]).unwrap(), vec![Point { values: vec![] }]);
        let big = [parse("-m", "1..200").unwrap(), parse("-P", "1..200").unwrap()];
        assert!(points(&big).is_err());
    }

    #[test]
    fn options_swept_together_take_the_same_value() {
        // Both ends' buffers at once: 64K..1M read as sizes (powers of 1024), as -s reads them.
        let s = parse("-s,-S", "64K..1M*2").unwrap();
        assert_eq!(s.values, ["64K", "128K", "256K", "512K", "1024K"]);
        assert_eq!(value("-s,-S", "1M"), Some(1048576.0));
        let p = points(&[s, parse("-P", "1,2").unwrap()]).unwrap();
        assert_eq!(
            p.len(),
            10,
            "one sweep of 5 by 2 flows, not the product of -s and -S"
        );
        assert_eq!(p[2].to_string(), "-s,-S 128K -P 1");
        let args: Vec<String> = ["-l", "2", "-S", "9"].map(String::from).to_vec();
        assert_eq!(
            p[2].apply(&args),
            ["-l", "2", "-S", "128K", "-s", "128K", "-P", "1"]
        );
        // An option swept twice, or an empty one, is refused by name.
        let e = points(&[parse("-s,-S", "1,2").unwrap(), parse("-S", "3,4").unwrap()]).unwrap_err();
        assert_eq!(e.option, "-S");
        assert!(e.why.contains("swept twice"), "{e}");
        let e = points(&[parse("-s,", "1,2").unwrap()]).unwrap_err();
        assert!(e.why.contains("empty option"), "{e}");
    }

    #[test]
    fn args_split_into_the_test_and_its_sweeps() {
        let args: Vec<String> = [
            "-l",
            "2",
            "-m",
            "32,64",
            "--rate=100..300:100",
            "-r",
            "1,1",
            "--cpus",
            "0,1",
        ]
        .map(String::from)
        .to_vec();
        let (rest, sweeps) = split_args(&args, SWEEPABLE).unwrap();
        assert_eq!(rest, ["-l", "2", "-r", "1,1", "--cpus", "0,1"]);
        assert_eq!(sweeps.len(), 2);
        assert_eq!(sweeps[1].option, "--rate");
        let p = &points(&sweeps).unwrap()[1];
        assert_eq!(
            p.apply(&rest),
            ["-l", "2", "-r", "1,1", "--cpus", "0,1", "-m", "32", "--rate", "200"]
        );
        let given: Vec<String> = ["-m", "9"].map(String::from).to_vec();
        assert_eq!(p.apply(&given), ["-m", "32", "--rate", "200"]);
    }
}
