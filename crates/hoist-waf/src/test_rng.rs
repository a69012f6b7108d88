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

/// `len` bytes drawn from `alphabet` with `next` (for generated inputs of a given shape).
pub(crate) fn bytes_from(next: &mut impl FnMut() -> u64, alphabet: &[u8], len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
        .collect()
}
