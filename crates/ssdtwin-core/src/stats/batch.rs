//! Output analysis of one simulated run: batch means, the MSER warm-up rule, ratio
//! estimates with confidence intervals (docs/fio.md, "Timing until the figures converge").
//!
//! A run's figures (IOPS, mean latency) are means of correlated observations: one I/O's
//! latency tells much about the next one's. The method of batch means cuts the run into
//! consecutive batches long enough to be nearly independent and treats each batch's figure
//! as one observation (Law, "Simulation Modeling and Analysis", §9.5.3). MSER (White 1997)
//! picks how many batches at the start to drop as the warm-up: the cut that minimizes the
//! standard error of what is left.

/// The standard normal quantile: Acklam's rational approximation (relative error below
/// 1.2e-9 over (0, 1)), so no table and no special functions are needed.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] =
        [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1, 2.506628277459239];
    const B: [f64; 5] = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] =
        [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    const P_LOW: f64 = 0.02425;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    }
}

/// The two-sided Student t quantile for `confidence` (0.95: the 97.5th percentile) with
/// `df` degrees of freedom: the Cornish-Fisher expansion around the normal quantile
/// (Abramowitz and Stegun 26.7.5), within 0.1 % of the exact value from 5 degrees of freedom
/// on; the batch rules never use fewer than 15.
pub fn t_quantile(confidence: f64, df: u32) -> f64 {
    let z = normal_quantile(0.5 + confidence / 2.0);
    let v = df.max(1) as f64;
    let (z3, z5, z7, z9) = (z.powi(3), z.powi(5), z.powi(7), z.powi(9));
    let g1 = (z3 + z) / 4.0;
    let g2 = (5.0 * z5 + 16.0 * z3 + 3.0 * z) / 96.0;
    let g3 = (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / 384.0;
    let g4 = (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z) / 92160.0;
    z + g1 / v + g2 / (v * v) + g3 / v.powi(3) + g4 / v.powi(4)
}

/// MSER's warm-up cut: the number of leading observations `d` (at most half of them) that
/// minimizes Σ_{i≥d} (y_i − ȳ_d)² / (n − d)², the squared standard error of the mean of what
/// is left. A cut at the limit means the series has not settled.
pub fn mser_cut(y: &[f64]) -> usize {
    let n = y.len();
    if n < 4 {
        return 0;
    }
    // Suffix sums give every candidate's statistic in one pass from the end.
    let (mut sum, mut sum_sq) = (0.0f64, 0.0f64);
    let mut best = (f64::INFINITY, 0usize);
    let mut stats = vec![0.0; n / 2 + 1];
    for (i, &v) in y.iter().enumerate().rev() {
        sum += v;
        sum_sq += v * v;
        if i <= n / 2 {
            let m = (n - i) as f64;
            stats[i] = (sum_sq - sum * sum / m).max(0.0) / (m * m);
        }
    }
    for (d, &s) in stats.iter().enumerate() {
        if s < best.0 {
            best = (s, d);
        }
    }
    best.1
}

/// An estimate and the half-width of its confidence interval.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Interval {
    pub estimate: f64,
    pub half_width: f64,
}

impl Interval {
    /// The half-width relative to the estimate (infinite for an estimate of 0).
    pub fn relative(&self) -> f64 {
        if self.estimate == 0.0 {
            return if self.half_width == 0.0 { 0.0 } else { f64::INFINITY };
        }
        self.half_width / self.estimate.abs()
    }
}

/// The ratio estimate Σy / Σx over batches (mean latency: latency sums over I/O counts;
/// the share of I/Os under a latency) and its confidence half-width with quantile `t`,
/// from the batches' residuals y − R·x (the delta method; Law §9.5.3). With every x equal
/// it is the plain mean of y/x and its usual interval.
pub fn ratio_interval(y: &[f64], x: &[f64], t: f64) -> Interval {
    let k = y.len().min(x.len());
    let (sy, sx): (f64, f64) = (y[..k].iter().sum(), x[..k].iter().sum());
    if k < 2 || sx <= 0.0 {
        return Interval { estimate: if sx > 0.0 { sy / sx } else { 0.0 }, half_width: f64::INFINITY };
    }
    let r = sy / sx;
    let ss: f64 = y[..k].iter().zip(&x[..k]).map(|(&a, &b)| (a - r * b).powi(2)).sum();
    let x_mean = sx / k as f64;
    let se = (ss / (k - 1) as f64 / k as f64).sqrt() / x_mean;
    Interval { estimate: r, half_width: t * se }
}

/// The lag-1 autocorrelation of a series (0 for fewer than 3 values or no variance): batch
/// means far from independent show it, and their interval would be too narrow.
pub fn lag1_autocorrelation(y: &[f64]) -> f64 {
    let n = y.len();
    if n < 3 {
        return 0.0;
    }
    let m = y.iter().sum::<f64>() / n as f64;
    let var: f64 = y.iter().map(|v| (v - m).powi(2)).sum();
    if var <= 0.0 {
        return 0.0;
    }
    let cov: f64 = y.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    cov / var
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn normal_and_t_quantiles_match_the_tables() {
        for (p, z) in [(0.975, 1.959964), (0.995, 2.575829), (0.5, 0.0), (0.01, -2.326348), (0.9999, 3.719016)] {
            assert!((normal_quantile(p) - z).abs() < 1e-5, "p {p}: {}", normal_quantile(p));
        }
        // Student t, two-sided 95 % and 99 % (standard tables).
        for (conf, df, t) in
            [(0.95, 15, 2.131), (0.95, 19, 2.093), (0.95, 30, 2.042), (0.95, 63, 1.998), (0.99, 20, 2.845), (0.90, 31, 1.696)]
        {
            let got = t_quantile(conf, df);
            assert!((got - t).abs() / t < 1e-3, "conf {conf} df {df}: {got} against {t}");
        }
    }

    #[test]
    fn mser_cuts_a_warm_up_and_nothing_from_a_settled_series() {
        let mut rng = Rng::new(3);
        let settled: Vec<f64> = (0..60).map(|_| 100.0 + rng.unit()).collect();
        assert!(mser_cut(&settled) <= 3, "{}", mser_cut(&settled));
        // A start 50 % low decaying over the first 10 observations.
        let warm: Vec<f64> = (0..60).map(|i| 100.0 + rng.unit() - if i < 10 { 50.0 * (10 - i) as f64 / 10.0 } else { 0.0 }).collect();
        let d = mser_cut(&warm);
        assert!((8..=12).contains(&d), "{d}");
        // A trend over the whole series never settles: the cut sits at the limit.
        let trend: Vec<f64> = (0..60).map(|i| i as f64).collect();
        assert_eq!(mser_cut(&trend), 30);
    }

    #[test]
    fn the_ratio_interval_covers_the_true_ratio_at_its_confidence() {
        // 400 runs of 30 batches of i.i.d. latencies around 100: the 95 % interval of the
        // mean covers 100 in about 95 % of the runs, and is the plain interval when x is constant.
        let mut rng = Rng::new(11);
        let mut covered = 0;
        for _ in 0..400 {
            let x: Vec<f64> = (0..30).map(|_| 50.0 + rng.below(20) as f64).collect();
            let y: Vec<f64> = x.iter().map(|&n| (0..n as u64).map(|_| 90.0 + 20.0 * rng.unit()).sum()).collect();
            let iv = ratio_interval(&y, &x, t_quantile(0.95, 29));
            if (iv.estimate - 100.0).abs() <= iv.half_width {
                covered += 1;
            }
        }
        assert!((365..=395).contains(&covered), "{covered} of 400");
        let y = [1.0, 2.0, 3.0, 4.0];
        let iv = ratio_interval(&y, &[1.0; 4], 1.0);
        assert_eq!(iv.estimate, 2.5);
        let sd = (((1.5f64).powi(2) * 2.0 + 0.5f64.powi(2) * 2.0) / 3.0).sqrt();
        assert!((iv.half_width - sd / 2.0).abs() < 1e-12);
    }

    #[test]
    fn autocorrelation_tells_a_smooth_series_from_noise() {
        let mut rng = Rng::new(5);
        let noise: Vec<f64> = (0..200).map(|_| rng.unit()).collect();
        assert!(lag1_autocorrelation(&noise).abs() < 0.2);
        let smooth: Vec<f64> = (0..200).map(|i| (i as f64 / 20.0).sin()).collect();
        assert!(lag1_autocorrelation(&smooth) > 0.9);
    }
}
