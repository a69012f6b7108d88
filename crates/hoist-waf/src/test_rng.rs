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

/// `per_len` inputs of each length in `lens`, drawn from `alphabet` with a generator seeded
/// with `seed`, shortest first: the shape the fast-path-against-reference tests share.
pub(crate) fn inputs<'a>(
    seed: u64,
    alphabet: &'a [u8],
    lens: std::ops::Range<usize>,
    per_len: usize,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    let mut next = xorshift(seed);
    lens.flat_map(move |len| std::iter::repeat_n(len, per_len))
        .map(move |len| bytes_from(&mut next, alphabet, len))
}
