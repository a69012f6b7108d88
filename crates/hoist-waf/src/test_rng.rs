//! A small deterministic generator for the unit tests that compare a fast path with a
//! reference on many generated inputs (xorshift64: no dependency, the same inputs every run).

/// Successive pseudo-random numbers from `seed` (which must not be 0).
pub(crate) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
