//! Zipf-distributed block numbers (fio's `random_distribution=zipf:THETA`): rank k of n
//! is drawn with probability proportional to k^-theta by rejection-inversion sampling
//! (Hörmann and Derflinger, "Rejection-inversion to generate variates from monotone
//! discrete distributions", 1996): constant memory and expected time whatever n. Ranks are
//! then spread over the region by a fixed permutation, so the hot blocks are not all at
//! its start (fio also scatters its ranks).

/// A Zipf sampler over `n` blocks.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    h_x1: f64,
    h_n: f64,
    s: f64,
    /// Multiplier of the permutation rank -> block (coprime with n).
    stride: u64,
}

/// ln(1+x)/x, exact near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x-1)/x, exact near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Zipf {
    /// A sampler of `n` (at least 1) blocks with exponent `theta` (> 0).
    pub fn new(n: u64, theta: f64) -> Zipf {
        let n = n.max(1);
        let mut z = Zipf {
            n,
            theta,
            h_x1: 0.0,
            h_n: 0.0,
            s: 0.0,
            stride: 1,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        // About n times the golden ratio's fraction, moved to the next number coprime with n.
        let mut stride = ((n as f64 * 0.618_033_988_7) as u64).max(1);
        while gcd(stride, n) != 1 {
            stride += 1;
        }
        z.stride = stride;
        z
    }

    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let lx = x.ln();
        helper2((1.0 - self.theta) * lx) * lx
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.theta)).max(-1.0);
        (helper1(t) * x).exp()
    }

    /// A rank in 1..=n, rank 1 the most frequent.
    pub fn rank(&self, rng: &mut fastrand::Rng) -> u64 {
        loop {
            let u = self.h_n + rng.f64() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inverse(u);
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            if (k as f64 - x) <= self.s || u >= self.h_integral(k as f64 + 0.5) - self.h(k as f64) {
                return k;
            }
        }
    }

    /// A block number in 0..n.
    pub fn block(&self, rng: &mut fastrand::Rng) -> u64 {
        let r = self.rank(rng) - 1;
        ((r as u128 * self.stride as u128) % self.n as u128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_follow_the_exponent() {
        let n = 1000u64;
        for theta in [0.5, 1.0, 1.2] {
            let z = Zipf::new(n, theta);
            let mut rng = fastrand::Rng::with_seed(7);
            let mut counts = vec![0u64; n as usize + 1];
            let draws = 200_000;
            for _ in 0..draws {
                let k = z.rank(&mut rng);
                assert!((1..=n).contains(&k));
                counts[k as usize] += 1;
            }
            let norm: f64 = (1..=n).map(|k| (k as f64).powf(-theta)).sum();
            for k in [1usize, 2, 10] {
                let want = (k as f64).powf(-theta) / norm * draws as f64;
                let got = counts[k] as f64;
                assert!(
                    (got - want).abs() < 5.0 * want.sqrt() + 0.01 * want,
                    "theta {theta} rank {k}: {got} draws, expected {want:.0}"
                );
            }
        }
    }

    #[test]
    fn blocks_are_a_permutation_of_ranks() {
        for n in [1u64, 2, 7, 12, 4096] {
            let z = Zipf::new(n, 1.1);
            let mut seen: Vec<u64> = (0..n)
                .map(|r| ((r as u128 * z.stride as u128) % n as u128) as u64)
                .collect();
            seen.sort();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
    }
}
