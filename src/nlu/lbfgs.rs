//! A small L-BFGS minimiser for the classifier's training objective.
//!
//! Why not Adam (what `linear.rs` uses): a weakly regularised logistic
//! regression is badly conditioned, and a fixed number of first-order
//! epochs stops far from its optimum (the softmax head's 94 % on CLINC150
//! is partly that). L-BFGS reaches the optimum in a few hundred
//! evaluations with no learning rate to tune, and it is deterministic.
//!
//! The objective is evaluated in `f64` for the line search; parameters and
//! gradients stay `f32` like the rest of the crate.

/// Stopping rules.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Iterations (each is one or a few objective evaluations).
    pub max_iterations: usize,
    /// Correction pairs kept.
    pub memory: usize,
    /// Stop when the largest gradient component is below this.
    pub gradient_tolerance: f32,
    /// Stop when the objective improves by less than this fraction.
    pub relative_tolerance: f64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_iterations: 300,
            memory: 10,
            gradient_tolerance: 1e-5,
            relative_tolerance: 1e-9,
        }
    }
}

/// What the run ended with (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    pub iterations: usize,
    pub evaluations: usize,
    pub value: f64,
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

/// Minimise `f` from `x` (updated in place). `f(x, grad)` returns the
/// objective and writes its gradient into `grad`.
pub fn minimize(
    x: &mut [f32],
    options: Options,
    mut f: impl FnMut(&[f32], &mut [f32]) -> f64,
) -> Outcome {
    let n = x.len();
    let mut g = vec![0.0f32; n];
    let mut value = f(x, &mut g);
    let mut evaluations = 1;
    let mut s_hist: Vec<Vec<f32>> = Vec::new();
    let mut y_hist: Vec<Vec<f32>> = Vec::new();
    let mut rho: Vec<f64> = Vec::new();
    let mut x_new = vec![0.0f32; n];
    let mut g_new = vec![0.0f32; n];
    let mut iterations = 0;
    while iterations < options.max_iterations {
        if g.iter().all(|v| v.abs() < options.gradient_tolerance) {
            break;
        }
        iterations += 1;
        // Two-loop recursion: d = -H·g.
        let mut d: Vec<f32> = g.iter().map(|v| -v).collect();
        let mut alpha = vec![0.0f64; s_hist.len()];
        for i in (0..s_hist.len()).rev() {
            alpha[i] = rho[i] * dot(&s_hist[i], &d);
            let a = alpha[i] as f32;
            d.iter_mut()
                .zip(&y_hist[i])
                .for_each(|(di, yi)| *di -= a * yi);
        }
        let gamma = match (s_hist.last(), y_hist.last()) {
            (Some(s), Some(y)) => (dot(s, y) / dot(y, y).max(f64::MIN_POSITIVE)) as f32,
            // First step: a unit-length move along -g.
            _ => (1.0 / dot(&g, &g).sqrt().max(1e-12)) as f32,
        };
        d.iter_mut().for_each(|v| *v *= gamma);
        for i in 0..s_hist.len() {
            let beta = rho[i] * dot(&y_hist[i], &d);
            let c = (alpha[i] - beta) as f32;
            d.iter_mut()
                .zip(&s_hist[i])
                .for_each(|(di, si)| *di += c * si);
        }
        let mut slope = dot(&g, &d);
        if slope >= 0.0 {
            // Not a descent direction (numerical trouble): restart from -g.
            s_hist.clear();
            y_hist.clear();
            rho.clear();
            let scale = (1.0 / dot(&g, &g).sqrt().max(1e-12)) as f32;
            d = g.iter().map(|v| -v * scale).collect();
            slope = dot(&g, &d);
        }
        // Backtracking (Armijo) line search from step 1.
        let mut step = 1.0f32;
        let mut accepted = None;
        for _ in 0..30 {
            x_new
                .iter_mut()
                .zip(x.iter().zip(&d))
                .for_each(|(xn, (xi, di))| *xn = xi + step * di);
            let v = f(&x_new, &mut g_new);
            evaluations += 1;
            if v.is_finite() && v <= value + 1e-4 * f64::from(step) * slope {
                accepted = Some(v);
                break;
            }
            step *= 0.5;
        }
        let Some(v) = accepted else { break };
        let s: Vec<f32> = x_new.iter().zip(x.iter()).map(|(a, b)| a - b).collect();
        let y: Vec<f32> = g_new.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        x.copy_from_slice(&x_new);
        g.copy_from_slice(&g_new);
        let improvement = value - v;
        value = v;
        if sy > 1e-12 {
            if s_hist.len() == options.memory.max(1) {
                s_hist.remove(0);
                y_hist.remove(0);
                rho.remove(0);
            }
            s_hist.push(s);
            y_hist.push(y);
            rho.push(1.0 / sy);
        }
        if improvement.abs() <= options.relative_tolerance * value.abs().max(1e-12) {
            break;
        }
    }
    Outcome {
        iterations,
        evaluations,
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_minimum_of_a_badly_scaled_quadratic() {
        // f = Σ c_i (x_i - i)², condition number 1e4.
        let c = [1.0f64, 10.0, 100.0, 1e4];
        let mut x = vec![0.0f32; 4];
        let out = minimize(&mut x, Options::default(), |x, g| {
            let mut v = 0.0;
            for i in 0..4 {
                let r = f64::from(x[i]) - i as f64;
                v += c[i] * r * r;
                g[i] = (2.0 * c[i] * r) as f32;
            }
            v
        });
        for (i, xi) in x.iter().enumerate() {
            assert!((xi - i as f32).abs() < 1e-3, "{x:?} {out:?}");
        }
        assert!(out.iterations < 100, "{out:?}");
    }
}
