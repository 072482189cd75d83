//! Closed-form WAF models (Desnoyers 2012, Xiang & Kurkoski 2011; docs/sources.md), used as
//! test oracles and printed beside simulated results. Nothing in the model itself uses them.

/// Principal branch of the Lambert W function for x in [-1/e, ∞), by Halley iteration.
pub fn lambert_w0(x: f64) -> f64 {
    assert!(x >= -1.0 / std::f64::consts::E - 1e-12, "W0 undefined for {x}");
    if x == 0.0 {
        return 0.0;
    }
    // Initial guess: series near the branch point, log form for large x.
    let mut w = if x < 1.0 {
        let p = (2.0 * (std::f64::consts::E * x + 1.0)).max(0.0).sqrt();
        -1.0 + p - p * p / 3.0
    } else {
        let l = x.ln();
        l - l.ln().max(0.0)
    };
    for _ in 0..64 {
        let e = w.exp();
        let f = w * e - x;
        let d = e * (w + 1.0);
        if d == 0.0 {
            break;
        }
        let next = w - f / (d - (w + 2.0) * f / (2.0 * w + 2.0));
        if (next - w).abs() <= 1e-15 * (1.0 + next.abs()) {
            return next;
        }
        w = next;
    }
    w
}

/// FIFO/LRU cleaning (Desnoyers SYSTOR'12 Eq. 4): α = T/U = 1 + OP.
pub fn waf_fifo(alpha: f64) -> f64 {
    alpha / (alpha + lambert_w0(-alpha * (-alpha).exp()))
}

/// Greedy cleaning with `np` units per erase block (Desnoyers Eq. 12); large `np` → FIFO.
pub fn waf_greedy(alpha: f64, np: f64) -> f64 {
    let k = 1.0 + 1.0 / (2.0 * np);
    waf_fifo(k * alpha) / k
}

/// Expected read-modify-write multiplier for s-byte writes on u-byte IUs at a-byte alignment.
pub fn waf_iu(s: f64, u: f64, a: f64) -> f64 {
    (s + u - a) / s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oracle_values_of_the_published_closed_forms() {
        assert!((waf_fifo(1.3) - 2.36).abs() < 0.005, "{}", waf_fifo(1.3));
        assert!((waf_greedy(1.07, 64.0) - 7.00).abs() < 0.01, "{}", waf_greedy(1.07, 64.0));
        assert!((waf_greedy(1.28, 1e6) - 2.48).abs() < 0.01);
        assert!((waf_fifo(1.07) - 7.82).abs() < 0.01);
        assert!((waf_fifo(1.5) - 1.72).abs() < 0.01);
        assert_eq!(waf_iu(4096.0, 65536.0, 4096.0), 16.0);
        assert_eq!(waf_iu(65536.0, 65536.0, 4096.0), 1.9375);
    }

    #[test]
    fn w_inverts() {
        for &x in &[-0.3, -0.1, 0.5, 1.0, 10.0, 1e6] {
            let w = lambert_w0(x);
            assert!((w * w.exp() - x).abs() < 1e-9 * (1.0 + x.abs()), "x={x} w={w}");
        }
    }
}
