//! Randomness: splitmix64 streams, derived per purpose from the configured seed, and the draws
//! the generator makes from them (uniform, log-uniform, bounded normal, picks, hex digits).

/// Noise is normal, truncated at this many standard deviations: a planted step's visibility
/// then has a hard bound that tests can check without flakiness.
pub(crate) const NOISE_LIMIT_SIGMA: f64 = 3.0;

/// splitmix64: tiny, fast, statistically sound for simulation, and trivially seedable.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// An independent stream for one purpose (`what`) under `seed`, so that drawing more for
    /// one purpose never shifts the draws of another.
    pub(crate) fn derive(seed: u64, what: u64) -> Self {
        Self::new(mix(seed, what))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (0 when n is 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in lo..=hi.
    pub(crate) fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Log-uniform in [lo, hi): metric levels span orders of magnitude.
    pub(crate) fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if lo <= 0.0 || hi <= lo {
            return lo.max(hi);
        }
        (lo.ln() + self.unit() * (hi.ln() - lo.ln())).exp()
    }

    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// One element of a non-empty slice (all callers pass non-empty vocabulary tables).
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Index drawn with probability proportional to `weights` (0 when all are zero).
    pub(crate) fn weighted(&mut self, weights: impl Iterator<Item = f64> + Clone) -> usize {
        let total: f64 = weights.clone().sum();
        let mut at = self.unit() * total;
        let mut last = 0;
        for (i, w) in weights.enumerate() {
            if w <= 0.0 {
                continue;
            }
            last = i;
            if at < w {
                return i;
            }
            at -= w;
        }
        last
    }

    /// Standard normal by Box-Muller.
    fn gaussian(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln stays finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Standard normal truncated to ±[`NOISE_LIMIT_SIGMA`] by rejection.
    pub(crate) fn bounded_gaussian(&mut self) -> f64 {
        for _ in 0..64 {
            let z = self.gaussian();
            if z.abs() <= NOISE_LIMIT_SIGMA {
                return z;
            }
        }
        0.0
    }

    pub(crate) fn hex(&mut self, len: usize) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        (0..len)
            .map(|_| char::from(DIGITS[self.below(16)]))
            .collect()
    }
}

fn mix(a: u64, b: u64) -> u64 {
    Rng::new(a ^ b.rotate_left(29) ^ 0xD6E8_FEB8_6659_FD93).next_u64()
}

/// FNV-1a: a stable hash of a name (std's hasher may change between releases).
pub(crate) fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
