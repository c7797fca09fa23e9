//! The statistics against reference values.
//!
//! Unless a test says otherwise, the reference figures were computed with SciPy 1.17.1
//! (NumPy 2.4) in Python: `scipy.stats.t.ppf`, `scipy.stats.t.interval`,
//! `scipy.stats.ttest_ind(..., equal_var=False)` and its `confidence_interval`, and for Fieller
//! an independent route: the roots of the quadratic (b² − t²v_b)ρ² − 2abρ + (a² − t²v_a) by
//! `numpy.roots`, with t from `scipy.stats.t.ppf` at the Welch–Satterthwaite df of a − ρ̂b.

use netrig_stats::{
    compare, regression_check, ConfidenceLevel, Decision, Direction, IterationRule, RatioMethod,
    RegressionOutcome, StatsError, Summary, Verdict,
};

const P90: f64 = 90.0;

fn level(percent: f64) -> ConfidenceLevel {
    ConfidenceLevel::from_percent(percent).unwrap()
}

/// |actual − expected| ≤ rel · |expected| (or ≤ rel when expected is 0).
#[track_caller]
fn close(actual: f64, expected: f64, rel: f64) {
    let tolerance = rel * expected.abs().max(f64::MIN_POSITIVE);
    assert!(
        (actual - expected).abs() <= tolerance,
        "{actual} is not {expected} within {rel:e} (off by {:e})",
        (actual - expected).abs()
    );
}

// ---- Student's t quantiles ----

#[test]
fn t_critical_values_match_scipy() {
    // scipy.stats.t.ppf(1 - (1 - level) / 2, df). netperf's own table (netlib.c `confid`)
    // agrees to its 3 decimals: 12.706, 2.571, 2.228, 2.042 at 95%; 63.657, 4.032, 3.169,
    // 2.750 at 99%.
    let table: &[(f64, f64, f64)] = &[
        (P90, 1.0, 6.313751514675037),
        (P90, 2.0, 2.9199855803537242),
        (P90, 5.0, 2.0150483733330233),
        (P90, 10.0, 1.8124611228116756),
        (P90, 30.0, 1.697260886593957),
        (P90, 100.0, 1.6602343260853392),
        (P90, 24.9, 1.7084046110997217),
        (95.0, 1.0, 12.706204736174694),
        (95.0, 2.0, 4.302652729749462),
        (95.0, 5.0, 2.5705818356363146),
        (95.0, 10.0, 2.228138851986274),
        (95.0, 30.0, 2.0422724563012378),
        (95.0, 100.0, 1.9839715185235518),
        (95.0, 24.9, 2.0599580324598343),
        (99.0, 1.0, 63.656741162871526),
        (99.0, 2.0, 9.924843200918287),
        (99.0, 5.0, 4.032142983555228),
        (99.0, 10.0, 3.16927267261695),
        (99.0, 30.0, 2.7499956535672254),
        (99.0, 100.0, 2.6258905214380173),
        (99.0, 24.9, 2.788349306455749),
    ];
    for &(percent, df, expected) in table {
        let t = level(percent).t_critical(df).unwrap();
        close(t, expected, 1e-10);
    }
}

#[test]
fn t_critical_refuses_a_df_that_is_not_positive() {
    for df in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(ConfidenceLevel::P95.t_critical(df), None, "df {df}");
    }
}

#[test]
fn levels_outside_0_to_100_are_refused_also_when_read() {
    for percent in [0.0, 100.0, -5.0, 150.0, f64::NAN] {
        assert!(matches!(
            ConfidenceLevel::from_percent(percent),
            Err(StatsError::InvalidLevel(_))
        ));
    }
    assert_eq!(ConfidenceLevel::P99.alpha(), 0.01);
    assert_eq!(serde_json::to_string(&ConfidenceLevel::P95).unwrap(), "95.0");
    assert_eq!(
        serde_json::from_str::<ConfidenceLevel>("99").unwrap(),
        ConfidenceLevel::P99
    );
    assert!(serde_json::from_str::<ConfidenceLevel>("100").is_err());
}

// ---- Summary ----

/// Seven runs of a throughput, Gbit/s.
const RUNS: [f64; 7] = [9.41, 9.38, 9.45, 9.40, 9.43, 9.36, 9.44];

#[test]
fn summary_of_a_known_sample() {
    // numpy: mean, std(ddof=1), median; scipy.stats.t.interval(level, 6, mean, s/sqrt(7)).
    let s = Summary::of(&RUNS).unwrap();
    assert_eq!(s.n, 7);
    close(s.mean, 9.41, 1e-14);
    close(s.std_dev.unwrap(), 0.0326598632371088, 1e-12);
    assert_eq!((s.min, s.max, s.median), (9.36, 9.45, 9.41));

    let ci = s.confidence_interval(ConfidenceLevel::P95).unwrap();
    assert_eq!(ci.df, 6.0);
    close(ci.low, 9.37979466434451, 1e-13);
    close(ci.high, 9.44020533565549, 1e-13);
    close(ci.half_width_pct.unwrap(), 0.32099187731657447, 1e-10);
    close(ci.width_pct().unwrap(), 2.0 * 0.32099187731657447, 1e-10);

    let ci = s.confidence_interval(ConfidenceLevel::P99).unwrap();
    close(ci.low, 9.3642345149253, 1e-13);
    close(ci.high, 9.4557654850747, 1e-13);
    close(ci.half_width_pct.unwrap(), 0.48634946944420615, 1e-10);
}

#[test]
fn even_median_is_the_mean_of_the_middle_two() {
    let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
    assert_eq!(s.median, 2.5);
    assert_eq!(s.mean, 2.5);
}

#[test]
fn one_run_has_no_spread_and_no_interval() {
    let s = Summary::of(&[42.0]).unwrap();
    assert_eq!((s.n, s.mean, s.median, s.min, s.max), (1, 42.0, 42.0, 42.0, 42.0));
    assert_eq!(s.std_dev, None);
    assert_eq!(s.std_error(), None);
    assert_eq!(s.confidence_interval(ConfidenceLevel::P95), None);
}

#[test]
fn equal_runs_have_exactly_zero_spread_and_a_point_interval() {
    // 0.1 three times: the plain arithmetic would leave a residue.
    let s = Summary::of(&[0.1, 0.1, 0.1]).unwrap();
    assert_eq!(s.mean, 0.1);
    assert_eq!(s.std_dev, Some(0.0));
    let ci = s.confidence_interval(ConfidenceLevel::P99).unwrap();
    assert_eq!((ci.low, ci.high, ci.half_width), (0.1, 0.1, 0.0));
    assert_eq!(ci.half_width_pct, Some(0.0));
}

#[test]
fn a_zero_mean_has_no_percent() {
    let ci = Summary::of(&[-1.0, 1.0])
        .unwrap()
        .confidence_interval(ConfidenceLevel::P95)
        .unwrap();
    assert_eq!(ci.half_width_pct, None);
    assert_eq!(ci.width_pct(), None);
}

#[test]
fn non_finite_and_empty_inputs_are_refused_by_name() {
    assert_eq!(Summary::of(&[]), Err(StatsError::Empty));
    match Summary::of(&[1.0, 2.0, f64::NAN, f64::INFINITY]) {
        Err(StatsError::NonFinite { index: 2, value }) => assert!(value.is_nan()),
        other => panic!("{other:?}"),
    }
    let err = Summary::of(&[1.0, f64::NEG_INFINITY]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sample 1 is -inf: every run's figure must be a finite number"
    );
}

// ---- The iteration rule ----

#[test]
fn iteration_rule_waits_for_min_then_stops_when_confident() {
    // -i 10,3 -I 99,5: RUNS's 99% interval is ±0.49% (0.97% in all) from 3 runs on.
    let rule = IterationRule::NETPERF_DEFAULT;
    assert_eq!(rule.check(&[]).unwrap().decision, Decision::Continue);
    assert_eq!(rule.check(&RUNS[..1]).unwrap().decision, Decision::Continue);
    // Two runs: 9.41, 9.38, whose 99% interval (t = 63.66 at 1 df) is ±10.1%: not yet, and
    // fewer than min anyway.
    let two = rule.check(&RUNS[..2]).unwrap();
    assert_eq!(two.decision, Decision::Continue);
    assert!(two.width_pct.unwrap() > 5.0);
    // Three: 9.41, 9.38, 9.45.
    let three = rule.check(&RUNS[..3]).unwrap();
    assert_eq!(three.decision, Decision::Confident);
    assert!(three.stop() && !three.not_confident());
    let expected = Summary::of(&RUNS[..3])
        .unwrap()
        .confidence_interval(ConfidenceLevel::P99)
        .unwrap();
    assert_eq!(three.width_pct, expected.width_pct());
    assert!(three.width_pct.unwrap() < 5.0);
}

#[test]
fn iteration_rule_width_is_the_whole_width_as_netperf_defines_it() {
    // RUNS at 99%: the whole width is 2 × 0.48634946944420615% (scipy, above). A target just
    // above it is met; just below, not (and 7 runs is the max here, so the rule stops and warns).
    let whole = 2.0 * 0.48634946944420615;
    let met = IterationRule::new(7, 3, ConfidenceLevel::P99, whole * (1.0 + 1e-9)).unwrap();
    assert_eq!(met.check(&RUNS).unwrap().decision, Decision::Confident);
    let missed = IterationRule::new(7, 3, ConfidenceLevel::P99, whole * (1.0 - 1e-9)).unwrap();
    let status = missed.check(&RUNS).unwrap();
    assert_eq!(status.decision, Decision::MaxReached);
    assert!(status.not_confident());
    close(status.width_pct.unwrap(), whole, 1e-10);
    // The half-width alone would have met it: the rule must not use it.
    let half = IterationRule::new(7, 3, ConfidenceLevel::P99, 0.6).unwrap();
    assert_eq!(half.check(&RUNS).unwrap().decision, Decision::MaxReached);
}

#[test]
fn iteration_rule_stops_at_max_without_the_width_and_says_so() {
    let rule = IterationRule::new(5, 3, ConfidenceLevel::P95, 5.0).unwrap();
    let noisy = [100.0, 150.0, 80.0, 130.0, 95.0, 120.0];
    for n in 0..5 {
        assert_eq!(
            rule.check(&noisy[..n]).unwrap().decision,
            Decision::Continue,
            "after {n}"
        );
    }
    let at_max = rule.check(&noisy[..5]).unwrap();
    assert_eq!(at_max.decision, Decision::MaxReached);
    assert!(at_max.stop() && at_max.not_confident());
    assert_eq!(at_max.n, 5);
    assert!(at_max.width_pct.unwrap() > 5.0);
    // More than max (a runner that went on) still says stop.
    assert_eq!(rule.check(&noisy).unwrap().decision, Decision::MaxReached);
}

#[test]
fn iteration_rule_meets_any_width_with_equal_runs_even_at_zero() {
    let rule = IterationRule::new(10, 3, ConfidenceLevel::P99, 1.0).unwrap();
    assert_eq!(rule.check(&[5.0, 5.0]).unwrap().decision, Decision::Continue);
    assert_eq!(
        rule.check(&[5.0, 5.0, 5.0]).unwrap().decision,
        Decision::Confident
    );
    assert_eq!(
        rule.check(&[0.0, 0.0, 0.0]).unwrap().decision,
        Decision::Confident
    );
    // A zero mean with spread has no width in percent: never met.
    let status = rule.check(&[-1.0, 1.0, 0.0]).unwrap();
    assert_eq!((status.decision, status.width_pct), (Decision::Continue, None));
}

#[test]
fn iteration_rule_refuses_what_netperf_would_silently_fix() {
    let p99 = ConfidenceLevel::P99;
    assert!(IterationRule::new(10, 0, p99, 5.0).is_err());
    assert!(IterationRule::new(2, 3, p99, 5.0).is_err());
    assert!(IterationRule::new(10, 3, p99, 0.0).is_err());
    assert!(IterationRule::new(10, 3, p99, f64::NAN).is_err());
    assert_eq!(
        IterationRule::new(10, 3, p99, 5.0).unwrap(),
        IterationRule::NETPERF_DEFAULT
    );
    assert!(IterationRule::NETPERF_DEFAULT.check(&[1.0, f64::NAN]).is_err());
}

/// `-i 3,1`: at least one run, so the rule may stop as soon as it is met, which is first
/// possible at the second run (one run has no interval); met on the last allowed run, it is
/// confident, not "max reached". (A min of 1 was refused, and the experiment, unable to build
/// the rule, reported every such point not confident beside a width within the one asked.)
#[test]
fn a_minimum_of_one_run_is_met_from_the_second_run_on() {
    let rule = IterationRule::new(3, 1, ConfidenceLevel::P95, 80.0).unwrap();
    assert_eq!(rule.check(&[100.0]).unwrap().decision, Decision::Continue);
    // Two runs 40 % apart: t(0.975, 1) = 12.7 makes the whole width far above 80 %.
    assert_eq!(rule.check(&[100.0, 140.0]).unwrap().decision, Decision::Continue);
    // The third run, the last allowed, brings the width to 18.5 % (< 80 %): confident.
    let s = rule.check(&[100.0, 108.0, 104.0]).unwrap();
    assert_eq!(s.decision, Decision::Confident, "{s:?}");
    assert!(s.width_pct.unwrap() < 80.0 && !s.not_confident());
    // At most one run: nothing to be confident of, and it stops there.
    let one = IterationRule::new(1, 1, ConfidenceLevel::P95, 80.0).unwrap();
    assert_eq!(one.check(&[100.0]).unwrap().decision, Decision::MaxReached);
}

// ---- Welch ----

/// The example data of the first example in Wikipedia's "Welch's t-test" article.
const A1: [f64; 15] = [
    27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4,
];
const A2: [f64; 15] = [
    27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4,
];

#[test]
fn welch_on_a_textbook_example() {
    // scipy.stats.ttest_ind(A1, A2, equal_var=False): t = -2.455356398286006,
    // df = 24.988529290231416, p = 0.021378001462866992; confidence_interval(0.95) =
    // (-3.984096267140929, -0.3492370661924069), (0.99) = (-4.626460461214432,
    // 0.2931271278810961). (The article rounds: t = -2.46, df ≈ 25.0, p = 0.021.)
    let c = compare(&A2, &A1, Direction::HigherIsBetter, ConfidenceLevel::P95).unwrap();
    close(c.welch.difference, 20.82 - 22.986666666666665, 1e-12);
    close(c.welch.t.unwrap(), -2.455356398286006, 1e-11);
    close(c.welch.df.unwrap(), 24.988529290231416, 1e-11);
    close(c.welch.p_value, 0.021378001462866992, 1e-8);
    close(c.welch.difference_ci.low, -3.984096267140929, 1e-10);
    close(c.welch.difference_ci.high, -0.3492370661924069, 1e-9);
    assert_eq!(c.verdict, Verdict::Worse);
    let lower = compare(&A2, &A1, Direction::LowerIsBetter, ConfidenceLevel::P95).unwrap();
    assert_eq!(lower.verdict, Verdict::Better);

    // At 99% the interval contains 0: not shown different; [-20.1 %, +1.3 %] is not within
    // ±5 %, so undetermined, but within ±25 % it is equal.
    let c = compare(&A2, &A1, Direction::HigherIsBetter, ConfidenceLevel::P99).unwrap();
    close(c.welch.difference_ci.low, -4.626460461214432, 1e-10);
    close(c.welch.difference_ci.high, 0.2931271278810961, 1e-9);
    assert_eq!(c.verdict, Verdict::Undetermined);
    assert_eq!(c.verdict_within(5.0), Verdict::Undetermined);
    assert_eq!(c.verdict_within(25.0), Verdict::Equal);
    assert!(c.test.p_value >= 0.01 && !c.test.significant);
}

// ---- Fieller ----

/// Base and arm of a throughput comparison, Gbit/s.
const BASE: [f64; 5] = [9.41, 9.38, 9.45, 9.40, 9.43];
const ARM: [f64; 6] = [8.71, 8.80, 8.65, 8.77, 8.69, 8.74];

#[test]
fn fieller_interval_of_the_percent_change() {
    // Reference (see the top of this file): estimate -7.301182635790646%; the df of
    // a − ρ̂b is 7.261409879130806; Fieller 95%: [-7.922864820971142, -6.67781733038958]%,
    // 99%: [-8.216115063216122, -6.382600053298604]%. Welch (arm − base): t =
    // -27.089401840854162, df = 7.551165624355334, p = 8.497172009246197e-09.
    let c = compare(&BASE, &ARM, Direction::HigherIsBetter, ConfidenceLevel::P95).unwrap();
    close(c.welch.t.unwrap(), -27.089401840854162, 1e-11);
    close(c.welch.df.unwrap(), 7.551165624355334, 1e-11);
    close(c.welch.p_value, 8.497172009246197e-09, 1e-6);
    assert_eq!(c.verdict, Verdict::Worse);
    let pc = c.percent_change.as_ref().unwrap();
    assert_eq!(pc.method, RatioMethod::Fieller);
    close(pc.estimate, -7.301182635790646, 1e-12);
    close(pc.df.unwrap(), 7.261409879130806, 1e-11);
    close(pc.ci.low, -7.922864820971142, 1e-10);
    close(pc.ci.high, -6.67781733038958, 1e-10);

    let c = compare(&BASE, &ARM, Direction::HigherIsBetter, ConfidenceLevel::P99).unwrap();
    let pc = c.percent_change.unwrap();
    close(pc.ci.low, -8.216115063216122, 1e-10);
    close(pc.ci.high, -6.382600053298604, 1e-10);
}

#[test]
fn fieller_is_asymmetric_where_the_ratio_is_uncertain() {
    // Reference: estimate 34.285714285714285%, Fieller 95% [11.683803907089185,
    // 63.18044439985657]% (g = 0.0229); the delta method would say [9.02, 59.55]%.
    let base = [100.0, 120.0, 90.0, 110.0];
    let arm = [130.0, 150.0, 125.0, 160.0, 140.0];
    let c = compare(&base, &arm, Direction::HigherIsBetter, ConfidenceLevel::P95).unwrap();
    let pc = c.percent_change.unwrap();
    assert_eq!(pc.method, RatioMethod::Fieller);
    close(pc.estimate, 34.285714285714285, 1e-12);
    close(pc.ci.low, 11.683803907089185, 1e-9);
    close(pc.ci.high, 63.18044439985657, 1e-10);
    assert!(pc.ci.high - pc.estimate > pc.estimate - pc.ci.low);
}

#[test]
fn fieller_bounds_solve_its_defining_equation() {
    // At each end ρ of Fieller's interval, (a − ρb)² = t²(v_a + ρ²v_b).
    let c = compare(&BASE, &ARM, Direction::HigherIsBetter, ConfidenceLevel::P95).unwrap();
    let pc = c.percent_change.unwrap();
    let (a, b) = (c.arm.mean, c.base.mean);
    let va = c.arm.variance().unwrap() / c.arm.n as f64;
    let vb = c.base.variance().unwrap() / c.base.n as f64;
    let t = ConfidenceLevel::P95.t_critical(pc.df.unwrap()).unwrap();
    for pct in [pc.ci.low, pc.ci.high] {
        let rho = 1.0 + pct / 100.0;
        close((a - rho * b).powi(2), t * t * (va + rho * rho * vb), 1e-9);
    }
}

#[test]
fn delta_method_when_fieller_is_unbounded() {
    // A baseline whose mean (0.375) is not significantly different from 0. Reference:
    // g = 7.256582818777561 (> 1: Fieller's set is the outside of [-429.3, 48.2]%, unbounded);
    // the delta interval with the same df (3.040717227718145): [-1064.993578381101,
    // 1998.3269117144341]%.
    let base = [0.5, -0.3, 1.2, 0.1];
    let arm = [2.0, 2.5, 1.8, 2.2];
    let c = compare(&base, &arm, Direction::HigherIsBetter, ConfidenceLevel::P95).unwrap();
    let pc = c.percent_change.unwrap();
    assert_eq!(pc.method, RatioMethod::Delta);
    close(pc.estimate, 466.6666666666667, 1e-12);
    close(pc.df.unwrap(), 3.040717227718145, 1e-11);
    close(pc.ci.low, -1064.993578381101, 1e-9);
    close(pc.ci.high, 1998.3269117144341, 1e-9);
}

#[test]
fn a_zero_baseline_mean_has_no_percent_change() {
    let c = compare(
        &[-1.0, 1.0],
        &[2.0, 3.0],
        Direction::HigherIsBetter,
        ConfidenceLevel::P95,
    )
    .unwrap();
    assert_eq!(c.percent_change, None);
}

// ---- Verdicts ----

#[test]
fn the_same_runs_in_another_order_are_equal_within_a_margin() {
    let mut shuffled = BASE;
    shuffled.reverse();
    let c = compare(&BASE, &shuffled, Direction::HigherIsBetter, ConfidenceLevel::P95).unwrap();
    assert_eq!(c.verdict, Verdict::Undetermined);
    assert_eq!(c.verdict_within(1.0), Verdict::Equal);
    // ±0.1 % is narrower than the interval of the change: the runs cannot show that.
    assert_eq!(c.verdict_within(0.1), Verdict::Undetermined);
    assert!(c.welch.p_value > 0.99 && c.test.p_value > 0.99);
    assert!(c.percent_change.unwrap().ci.contains(0.0));
}

#[test]
fn clearly_separated_arms_are_better_or_worse_by_direction() {
    let fast = [20.1, 19.8, 20.3, 20.0];
    let slow = [10.2, 9.9, 10.1, 10.0];
    let p95 = ConfidenceLevel::P95;
    assert_eq!(
        compare(&slow, &fast, Direction::HigherIsBetter, p95)
            .unwrap()
            .verdict,
        Verdict::Better
    );
    assert_eq!(
        compare(&fast, &slow, Direction::HigherIsBetter, p95)
            .unwrap()
            .verdict,
        Verdict::Worse
    );
    assert_eq!(
        compare(&slow, &fast, Direction::LowerIsBetter, p95)
            .unwrap()
            .verdict,
        Verdict::Worse
    );
    assert_eq!(
        compare(&fast, &slow, Direction::LowerIsBetter, p95)
            .unwrap()
            .verdict,
        Verdict::Better
    );
}

#[test]
fn arms_without_spread() {
    let p95 = ConfidenceLevel::P95;
    // Equal constants: equal within any margin, exactly.
    let c = compare(&[3.0, 3.0], &[3.0, 3.0, 3.0], Direction::LowerIsBetter, p95).unwrap();
    assert_eq!(
        (c.verdict_within(0.001), c.welch.t, c.welch.df, c.welch.p_value),
        (Verdict::Equal, None, None, 1.0)
    );
    let pc = c.percent_change.unwrap();
    assert_eq!((pc.estimate, pc.ci.low, pc.ci.high, pc.df), (0.0, 0.0, 0.0, None));
    // Different constants: as certain as it gets.
    let c = compare(&[0.0, 0.0], &[5.0, 5.0, 5.0], Direction::LowerIsBetter, p95).unwrap();
    assert_eq!((c.verdict, c.welch.p_value), (Verdict::Worse, 0.0));
    // One side without spread: Welch's df is the other side's n − 1.
    let c = compare(
        &[10.0, 10.0, 10.0],
        &[11.0, 12.0, 13.0, 12.0],
        Direction::HigherIsBetter,
        p95,
    )
    .unwrap();
    close(c.welch.df.unwrap(), 3.0, 1e-12);
    assert_eq!(c.verdict, Verdict::Better);
}

#[test]
fn a_comparison_needs_two_runs_a_side() {
    let p95 = ConfidenceLevel::P95;
    assert_eq!(
        compare(&[1.0], &[1.0, 2.0], Direction::HigherIsBetter, p95).unwrap_err(),
        StatsError::TooFewSamples {
            which: "the baseline",
            n: 1
        }
    );
    assert_eq!(
        compare(&[1.0, 2.0], &[1.0], Direction::HigherIsBetter, p95).unwrap_err(),
        StatsError::TooFewSamples {
            which: "the arm",
            n: 1
        }
    );
}

// ---- Regression check ----

#[test]
fn regression_beyond_the_threshold_for_higher_is_better() {
    // BASE → ARM is -7.30%, [-7.92, -6.68]% at 95% (above).
    let p95 = ConfidenceLevel::P95;
    let check = regression_check(&BASE, &ARM, Direction::HigherIsBetter, 5.0, p95).unwrap();
    assert_eq!(check.outcome, RegressionOutcome::Regressed);
    assert!(check.regressed());
    assert_eq!(
        check.to_string(),
        "-7.30% [-7.92%, -6.68%] at 95%, base 9.414 (n 5) new 8.72667 (n 6), threshold -5%: regressed"
    );
    // The interval straddles -7%: not shown to be worse by more than 7%.
    let check = regression_check(&BASE, &ARM, Direction::HigherIsBetter, 7.0, p95).unwrap();
    assert_eq!(check.outcome, RegressionOutcome::NotRegressed);
    // An improvement is never a regression.
    let check = regression_check(&ARM, &BASE, Direction::HigherIsBetter, 0.0, p95).unwrap();
    assert_eq!(check.outcome, RegressionOutcome::NotRegressed);
}

#[test]
fn regression_beyond_the_threshold_for_lower_is_better() {
    let p95 = ConfidenceLevel::P95;
    let base = [100.0, 102.0, 98.0, 101.0, 99.0];
    let new = [110.0, 112.0, 109.0, 111.0, 108.0];
    let check = regression_check(&base, &new, Direction::LowerIsBetter, 5.0, p95).unwrap();
    assert_eq!(check.outcome, RegressionOutcome::Regressed);
    assert!(check.to_string().ends_with("threshold +5%: regressed"), "{check}");
    let check = regression_check(&base, &new, Direction::LowerIsBetter, 15.0, p95).unwrap();
    assert_eq!(check.outcome, RegressionOutcome::NotRegressed);
    // Lower latency is better: no regression.
    let check = regression_check(&new, &base, Direction::LowerIsBetter, 0.0, p95).unwrap();
    assert_eq!(check.outcome, RegressionOutcome::NotRegressed);
}

#[test]
fn regression_is_undetermined_without_a_bounded_interval() {
    let p95 = ConfidenceLevel::P95;
    let check = regression_check(
        &[0.5, -0.3, 1.2, 0.1],
        &[-2.0, -2.5, -1.8, -2.2],
        Direction::HigherIsBetter,
        5.0,
        p95,
    )
    .unwrap();
    assert_eq!(check.outcome, RegressionOutcome::Undetermined);
    assert!(!check.regressed());
    assert!(check.to_string().contains("(delta method)"), "{check}");
    assert!(regression_check(&BASE, &ARM, Direction::HigherIsBetter, -1.0, p95).is_err());
}

// ---- Serialization ----

#[test]
fn results_read_back_from_json() {
    let check = regression_check(&BASE, &ARM, Direction::HigherIsBetter, 5.0, ConfidenceLevel::P99).unwrap();
    let json = serde_json::to_string(&check).unwrap();
    assert!(json.contains("\"outcome\":\"regressed\""), "{json}");
    assert!(json.contains("\"direction\":\"higher_is_better\""), "{json}");
    assert!(json.contains("\"method\":\"fieller\""), "{json}");
    assert_eq!(
        serde_json::from_str::<netrig_stats::RegressionCheck>(&json).unwrap(),
        check
    );

    // The undefined figures are nulls, not NaN (which JSON cannot carry).
    let c = compare(
        &[3.0, 3.0],
        &[3.0, 3.0],
        Direction::LowerIsBetter,
        ConfidenceLevel::P95,
    )
    .unwrap();
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(
        serde_json::from_str::<netrig_stats::Comparison>(&json).unwrap(),
        c
    );

    let status = IterationRule::NETPERF_DEFAULT.check(&RUNS[..1]).unwrap();
    let json = serde_json::to_string(&status).unwrap();
    assert!(
        json.contains("\"decision\":\"continue\"") && json.contains("\"width_pct\":null"),
        "{json}"
    );
    assert_eq!(
        serde_json::from_str::<netrig_stats::IterationStatus>(&json).unwrap(),
        status
    );
}
