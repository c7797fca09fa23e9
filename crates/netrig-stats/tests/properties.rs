//! Properties that must hold for any data, checked on many generated samples, and the methods'
//! calibration checked by simulation: a 95% interval must cover the true value in about 95% of
//! simulated experiments, and arms drawn from one distribution must be found neither better
//! nor worse in about 95% of comparisons. The generator is seeded, so every run checks the same samples.

use netrig_stats::{compare, ConfidenceLevel, Direction, RatioMethod, Summary, Verdict};

/// xorshift64* with Box–Muller: enough for test data, and no dependency.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        // 53 bits in (0, 1).
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    fn sample(&mut self, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        (0..n).map(|_| self.normal(mean, sd)).collect()
    }
}

fn levels() -> [ConfidenceLevel; 4] {
    [80.0, 90.0, 95.0, 99.0].map(|p| ConfidenceLevel::from_percent(p).unwrap())
}

#[test]
fn the_interval_contains_the_mean_and_widens_with_the_level() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..500 {
        let n = 2 + case % 20;
        let samples = rng.sample(n, 1e9, 1e7 * (1 + case % 7) as f64);
        let s = Summary::of(&samples).unwrap();
        assert!(s.min <= s.median && s.median <= s.max);
        assert!(s.min <= s.mean && s.mean <= s.max);
        let mut previous = 0.0;
        for level in levels() {
            let ci = s.confidence_interval(level).unwrap();
            assert!(ci.contains(s.mean), "case {case}");
            assert!(
                (ci.high - s.mean - (s.mean - ci.low)).abs() <= 1e-9 * s.mean,
                "symmetric"
            );
            assert!(ci.half_width > previous, "case {case}: {level} not wider");
            previous = ci.half_width;
        }
    }
}

#[test]
fn the_interval_narrows_with_more_runs() {
    // The same spread with more runs: two figures alternating, mean 100, deviation 1 (s²
    // approaches 1 from above as n grows, and t and 1/√n fall).
    let level = ConfidenceLevel::P95;
    let mut previous = f64::INFINITY;
    for n in 2..60 {
        let samples: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 99.0 } else { 101.0 }).collect();
        let ci = Summary::of(&samples).unwrap().confidence_interval(level).unwrap();
        assert!(ci.half_width < previous, "n {n}");
        previous = ci.half_width;
    }
    // And a sample repeated k times: the interval of the whole is narrower.
    let mut rng = Rng(7);
    for _ in 0..100 {
        let base = rng.sample(4, 50.0, 5.0);
        let mut previous = f64::INFINITY;
        for k in 1..6 {
            let repeated: Vec<f64> = base.iter().cycle().take(4 * k).copied().collect();
            let ci = Summary::of(&repeated)
                .unwrap()
                .confidence_interval(level)
                .unwrap();
            assert!(ci.half_width < previous);
            previous = ci.half_width;
        }
    }
}

#[test]
fn a_95_percent_interval_covers_the_true_mean_about_95_percent_of_the_time() {
    let mut rng = Rng(12345);
    let trials = 4000;
    for n in [3, 5, 10] {
        let covered = (0..trials)
            .filter(|_| {
                let s = Summary::of(&rng.sample(n, 10.0, 2.0)).unwrap();
                s.confidence_interval(ConfidenceLevel::P95)
                    .unwrap()
                    .contains(10.0)
            })
            .count();
        // Binomial sd at 4000 trials: 0.34%; ±1.5% is more than 4 sd.
        let rate = covered as f64 / trials as f64;
        assert!((0.935..=0.965).contains(&rate), "n {n}: coverage {rate}");
    }
}

#[test]
fn arms_from_one_distribution_differ_about_5_percent_of_the_time() {
    let mut rng = Rng(99);
    let trials = 3000;
    let not_tied = (0..trials)
        .filter(|i| {
            // Unequal n and variances within the same distribution (one sd per pair).
            let base = rng.sample(3 + i % 5, 100.0, 4.0);
            let arm = rng.sample(4 + i % 3, 100.0, 4.0);
            let c = compare(&base, &arm, Direction::HigherIsBetter, ConfidenceLevel::P95).unwrap();
            matches!(c.verdict, Verdict::Better | Verdict::Worse)
        })
        .count();
    let rate = not_tied as f64 / trials as f64;
    // The false-positive rate should be α = 5% (Welch's test is approximate: a little off).
    assert!((0.035..=0.065).contains(&rate), "false positives {rate}");
}

#[test]
fn welch_and_fieller_intervals_cover_about_95_percent_with_unequal_variances() {
    let mut rng = Rng(2024);
    let trials = 3000;
    let (mut difference, mut ratio) = (0, 0);
    for i in 0..trials {
        // True means 10 and 9 (ratio 0.9, -10%), very unequal spreads and sizes.
        let base = rng.sample(3 + i % 4, 10.0, 0.1);
        let arm = rng.sample(8, 9.0, 1.0);
        let c = compare(&base, &arm, Direction::HigherIsBetter, ConfidenceLevel::P95).unwrap();
        difference += usize::from(c.welch.difference_ci.contains(-1.0));
        ratio += usize::from(c.percent_change.unwrap().ci.contains(-10.0));
    }
    for (what, hits) in [("difference", difference), ("ratio", ratio)] {
        let rate = hits as f64 / trials as f64;
        assert!((0.93..=0.97).contains(&rate), "{what}: coverage {rate}");
    }
}

#[test]
fn clearly_different_arms_are_found_so() {
    let mut rng = Rng(5);
    for _ in 0..200 {
        let base = rng.sample(5, 100.0, 1.0);
        let arm = rng.sample(5, 110.0, 1.0);
        let up = compare(&base, &arm, Direction::HigherIsBetter, ConfidenceLevel::P99).unwrap();
        assert_eq!(up.verdict, Verdict::Better);
        let pc = up.percent_change.unwrap();
        assert!(pc.ci.low > 0.0 && pc.ci.contains(pc.estimate));
        let down = compare(&base, &arm, Direction::LowerIsBetter, ConfidenceLevel::P99).unwrap();
        assert_eq!(down.verdict, Verdict::Worse);
    }
}

#[test]
fn the_verdict_agrees_with_the_p_value() {
    let mut rng = Rng(31337);
    for i in 0..1000 {
        let base = rng.sample(3 + i % 6, 10.0, 1.0);
        let arm = rng.sample(3 + i % 4, 10.0 + (i % 5) as f64 * 0.5, 1.0 + (i % 3) as f64);
        for level in levels() {
            let c = compare(&base, &arm, Direction::HigherIsBetter, level).unwrap();
            let significant = c.test.p_value < level.alpha();
            // Exactly at the edge the two may round differently.
            if (c.test.p_value - level.alpha()).abs() > 1e-9 {
                assert_eq!(
                    matches!(c.verdict, Verdict::Better | Verdict::Worse),
                    significant,
                    "case {i} at {level}"
                );
                assert_eq!(c.test.significant, significant, "case {i} at {level}");
                assert_eq!(
                    c.test.difference_ci.contains(0.0),
                    !significant,
                    "case {i} at {level}"
                );
            }
        }
    }
}

/// The verdict and the interval shown beside it are one test: better or worse exactly when the
/// percent change's interval excludes 0. Arms far apart in mean with very different spreads
/// (a near-zero arm beside a noisy baseline, as under a 100 Mbit/s limit on a busy machine),
/// near the edge of significance, where Welch's df (at ratio 1) and the ratio's (at the
/// estimated ratio) differ: with one df for the test and another for the interval, a −99 %
/// arm with an interval excluding 0 was called not different, and the reverse.
#[test]
fn the_verdict_and_the_percent_interval_never_disagree() {
    let mut rng = Rng(4242);
    let mut disagreements = Vec::new();
    for i in 0..4000 {
        let (nb, na) = (3 + i % 5, 3 + (i / 5) % 5);
        let base = rng.sample(nb, 100.0, 20.0 + (i % 7) as f64 * 15.0);
        let arm = rng.sample(na, 1.0 + (i % 11) as f64 * 9.0, 0.5 + (i % 3) as f64 * 4.0);
        for level in levels() {
            let c = compare(&base, &arm, Direction::HigherIsBetter, level).unwrap();
            let Some(pc) = c
                .percent_change
                .as_ref()
                .filter(|p| p.method == RatioMethod::Fieller)
            else {
                continue;
            };
            let decided = matches!(c.verdict, Verdict::Better | Verdict::Worse);
            if decided == pc.ci.contains(0.0) {
                disagreements.push(format!(
                    "case {i} at {level}: {:?} beside [{:.2}, {:.2}] %",
                    c.verdict, pc.ci.low, pc.ci.high
                ));
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements, e.g. {:?}",
        disagreements.len(),
        &disagreements[..disagreements.len().min(5)]
    );
}
