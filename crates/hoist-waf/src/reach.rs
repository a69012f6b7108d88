//! Which bytes the later steps of a transformation chain can put into a value.
//!
//! A multiMatch rule tests every step of its chain, so each step used to be computed for
//! every value. CRS 934100 decodes each argument with base64Decode and then runs
//! urlDecodeUni, jsDecode and removeWhitespace on the result; its regex needs one of
//! `_ ( . : [` (see `byte_filter`). When the decoded value has none of those and none of
//! the bytes that let a later step create new ones (`%` for urlDecodeUni, `\` for
//! jsDecode), no later step can match, and none is computed. The check is made once per
//! value, after the chain's last step that may write anything (`check_point`): before it,
//! nothing can be ruled out.
//!
//! The same reasoning passes over values for the validation operators, which flag only a
//! value holding certain bytes (`operator_needs`): CRS 920270 (`@validateByteRange 1-255`
//! after urlDecodeUni) can only match an argument with a NUL or a `%`, 920250
//! (`@validateUtf8Encoding`) one with a non-ASCII byte, and `@detectXSS` needs a `<` or a
//! `=` (`value_needs`, checked on the value as collected before anything is transformed;
//! 941100's decoders add their triggers).
//!
//! Each transformation is described by what it may add to its input's bytes
//! ([`Transform::adds`]): nothing, some fixed bytes (cmdLine's space and lower-case
//! letters), or anything at all once the input holds a trigger byte (urlDecode's `%`).
//! Descriptions may claim more than a transformation does, never less: a wrong "cannot"
//! would lose a match.

use crate::chains::{ChainId, Chains};
use crate::operators::Operator;
use crate::transforms::Transform;

/// A set of byte values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ByteSet {
    bits: [u64; 4],
}

impl ByteSet {
    /// The bytes `value` holds.
    #[cfg(test)]
    pub fn of(value: &[u8]) -> ByteSet {
        let mut bits = [0u64; 4];
        for &b in value {
            if let Some(w) = bits.get_mut(usize::from(b >> 6)) {
                *w |= 1 << (b & 63);
            }
        }
        ByteSet { bits }
    }

    /// The bytes `present` marks (0 or 1 per byte value), eight at a time: the multiply
    /// gathers eight 0/1 bytes into the top byte (no carries: each product term lands on
    /// its own bit).
    pub fn of_present(present: &[u8; 256]) -> ByteSet {
        let mut bits = [0u64; 4];
        for (i, chunk) in present.chunks_exact(8).enumerate() {
            let Ok(eight) = <[u8; 8]>::try_from(chunk) else {
                continue;
            };
            let x = u64::from_le_bytes(eight) & 0x0101_0101_0101_0101;
            let byte = x.wrapping_mul(0x0102_0408_1020_4080) >> 56;
            if let Some(w) = bits.get_mut(i / 8) {
                *w |= byte << ((i % 8) * 8);
            }
        }
        ByteSet { bits }
    }

    const fn from_bytes(bytes: &[u8]) -> ByteSet {
        let mut bits = [0u64; 4];
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            bits[(b >> 6) as usize] |= 1 << (b & 63);
            i += 1;
        }
        ByteSet { bits }
    }

    /// The bytes from `first` to `last`.
    const fn range(first: u8, last: u8) -> ByteSet {
        let mut bits = [0u64; 4];
        let mut b = first as usize;
        while b <= last as usize {
            bits[b >> 6] |= 1 << (b & 63);
            b += 1;
        }
        ByteSet { bits }
    }

    pub(crate) const fn union(self, other: ByteSet) -> ByteSet {
        ByteSet {
            bits: [
                self.bits[0] | other.bits[0],
                self.bits[1] | other.bits[1],
                self.bits[2] | other.bits[2],
                self.bits[3] | other.bits[3],
            ],
        }
    }

    /// Whether `value` holds one of the bytes.
    ///
    /// Eight bytes are tested before each branch rather than one: most values hold none of
    /// the bytes, so every byte is read either way (934100's byte filter, the validation
    /// rules' needed bytes; -28k instructions on the engine bench's form POST).
    pub fn found_in(&self, value: &[u8]) -> bool {
        let bit = |b: u8| self.bits[usize::from(b >> 6) & 3] >> (b & 63) & 1;
        let mut eights = value.chunks_exact(8);
        for eight in &mut eights {
            if eight.iter().fold(0, |acc, &b| acc | bit(b)) != 0 {
                return true;
            }
        }
        eights.remainder().iter().any(|&b| bit(b) != 0)
    }

    pub fn meets(&self, other: &ByteSet) -> bool {
        self.bits.iter().zip(&other.bits).any(|(a, b)| a & b != 0)
    }

    /// The ASCII bytes of a 128-bit set (bit `b`: byte `b`).
    pub fn from_ascii_bits(bits: u128) -> ByteSet {
        ByteSet {
            bits: [bits as u64, (bits >> 64) as u64, 0, 0],
        }
    }
}

/// What a transformation may add to the bytes of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adds {
    /// `extra` at most, while the input holds none of `trigger`; with one of them, anything.
    Bytes {
        trigger: ByteSet,
        extra: ByteSet,
    },
    Anything,
}

const NOTHING: ByteSet = ByteSet { bits: [0; 4] };
const SPACE: ByteSet = ByteSet::from_bytes(b" ");
const LOWER: ByteSet = ByteSet::range(b'a', b'z');
const UPPER: ByteSet = ByteSet::range(b'A', b'Z');
const HIGH: ByteSet = ByteSet::range(0x80, 0xff);

const fn only(extra: ByteSet) -> Adds {
    Adds::Bytes {
        trigger: NOTHING,
        extra,
    }
}

const fn after(trigger: &[u8], extra: ByteSet) -> Adds {
    Adds::Bytes {
        trigger: ByteSet::from_bytes(trigger),
        extra,
    }
}

impl Transform {
    /// What this transformation may add to its input's bytes (as `transforms` implements
    /// each; see the module comment).
    pub(crate) fn adds(self) -> Adds {
        use Transform::*;
        match self {
            // Only remove bytes, or keep them.
            RemoveNulls | RemoveWhitespace | RemoveComments | RemoveCommentsChar | Trim
            | TrimLeft | TrimRight => only(NOTHING),
            // Put a space where something else was (other whitespace, NUL, a comment).
            ReplaceNulls | CompressWhitespace | ReplaceComments => only(SPACE),
            Lowercase => only(LOWER),
            Uppercase => only(UPPER),
            // Lowercases, and turns `,` and `;` (and runs of whitespace) into a space.
            CmdLine => only(LOWER.union(SPACE)),
            // normalisePathWin turns `\` into `/`; neither adds anything else.
            NormalisePath | NormalisePathWin => only(ByteSet::from_bytes(b"/")),
            // `+` becomes a space; `%` escapes are any byte.
            UrlDecode | UrlDecodeUni => after(b"%", SPACE),
            // Escapes start with a backslash (JS, CSS, C) or an ampersand (HTML).
            JsDecode | CssDecode | EscapeSeqDecode => after(b"\\", NOTHING),
            HtmlEntityDecode => after(b"&", NOTHING),
            // Only bytes from 0x80 up are rewritten (as `%uXXXX`).
            Utf8ToUnicode => Adds::Bytes {
                trigger: HIGH,
                extra: NOTHING,
            },
            Base64Decode | Base64DecodeExt | Base64Encode | UrlEncode | HexEncode | HexDecode
            | Length | Sha1 => Adds::Anything,
        }
    }
}

/// Whether no step of `chain` may write anything whatever its input (base64Decode, hex,
/// sha1...): its steps only decode escapes, drop or replace bytes, change case.
pub(crate) fn no_step_writes_anything(chains: &Chains, chain: ChainId) -> bool {
    chains
        .path(chain)
        .iter()
        .filter_map(|n| chains.node(*n).transform)
        .all(|t| t.adds() != Adds::Anything)
}

/// Where a multiMatch rule with filter bytes `wanted` checks a value: the index in
/// `chain`'s path (`Chains::path`) of the last step that may write anything (the original
/// when none does; no check before it can rule anything out), and the bytes whose absence
/// from that step's value means no later step can hold one of `wanted` (see `may_reach`).
/// `None` when that is the last step, or the later steps may write one of `wanted` or a
/// trigger whatever the value.
pub(crate) fn check_point(
    chains: &Chains,
    chain: ChainId,
    wanted: &ByteSet,
) -> Option<(usize, ByteSet)> {
    let path = chains.path(chain);
    let transform = |n: &ChainId| chains.node(*n).transform;
    let at = path
        .iter()
        .rposition(|n| transform(n).is_some_and(|t| t.adds() == Adds::Anything))
        .unwrap_or(0);
    if at + 1 >= path.len() {
        return None;
    }
    reach_set(path.iter().skip(at + 1).filter_map(transform), wanted).map(|d| (at, d))
}

/// The bytes one of which a value must hold for a non-negated `operator` to match it (the
/// validation operators flag a byte outside their range, a `%` escape, a non-ASCII
/// sequence); `None` for the operators that can match any value.
pub(crate) fn operator_needs(operator: &Operator) -> Option<ByteSet> {
    match operator {
        Operator::ValidateByteRange(allowed) => {
            Some(ByteSet::of_present(&allowed.map(|ok| u8::from(!ok))))
        }
        // A malformed escape starts at a `%`; without one the value is valid.
        Operator::ValidateUrlEncoding => Some(ByteSet::from_bytes(b"%")),
        // ASCII alone is valid UTF-8.
        Operator::ValidateUtf8Encoding => Some(HIGH),
        // libinjection (libinjectionrs 0.1's html5.rs and detector.rs) flags a tag, a
        // comment, a doctype, or an attribute's value after a listed attribute name. The
        // first three are reached only through a `<` (the text state's one way out); a
        // value after a name only through a `=` (the quoted contexts' first value follows
        // no name).
        Operator::DetectXss => Some(ByteSet::from_bytes(b"<=")),
        _ => None,
    }
}

/// For a rule whose operator needs one of `wanted` (`operator_needs`): the bytes `D` such
/// that a value as collected, holding none of `D`, cannot come to hold one of `wanted`
/// through `chain`, at any step; so the rule cannot match it, and neither the chain nor the
/// operator is run. `None` when the chain may write anything or its fixed extras meet
/// `wanted`.
pub(crate) fn value_needs(chains: &Chains, chain: ChainId, wanted: &ByteSet) -> Option<ByteSet> {
    let path = chains.path(chain);
    reach_set(
        path.iter().filter_map(|n| chains.node(*n).transform),
        wanted,
    )
}

/// For a chain `rest` with no step that may write anything: the bytes `D` such that a value
/// can come to hold one of `wanted` through `rest` exactly when it holds one of `D` (or
/// always: `None`). A value's bytes only grow along the chain, by each step's fixed
/// `extra`, and a step can write anything only when what reaches it holds its trigger; so
/// `D` is `wanted` and every trigger, unless the extras alone meet a later trigger or
/// `wanted`.
fn reach_set(rest: impl Iterator<Item = Transform>, wanted: &ByteSet) -> Option<ByteSet> {
    let mut danger = *wanted;
    let mut added = ByteSet::default();
    for t in rest {
        let Adds::Bytes { trigger, extra } = t.adds() else {
            return None;
        };
        if added.meets(&trigger) {
            return None;
        }
        danger = danger.union(trigger);
        added = added.union(extra);
    }
    (!added.meets(wanted)).then_some(danger)
}

/// Whether `value` can come to hold one of `wanted` after the transformations `rest`,
/// applied in order (step by step; `reach_set` answers the same with one set).
#[cfg(test)]
pub(crate) fn may_reach(
    value: &[u8],
    rest: impl Iterator<Item = Transform>,
    wanted: &ByteSet,
) -> bool {
    let mut present = ByteSet::of(value);
    for t in rest {
        if present.meets(wanted) {
            return true;
        }
        match t.adds() {
            Adds::Anything => return true,
            Adds::Bytes { trigger, .. } if present.meets(&trigger) => return true,
            Adds::Bytes { extra, .. } => present = present.union(extra),
        }
    }
    present.meets(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::xorshift;
    use crate::transforms::ALL as ALL_TRANSFORMS;

    /// Every transformation's output holds only its input's bytes and what `adds` allows,
    /// on generated values rich in escapes, comments, whitespace and high bytes.
    #[test]
    fn adds_covers_every_byte_a_transformation_writes() {
        let alphabet: &[u8] = b"aZ09 \t\n\x0b\r\x00%+uU&#;x\\/*-.,;:_([<'\"`^\xc3\xa9\xff";
        let mut next = xorshift(0x5eed);
        let mut below = |n: usize| (next() % n as u64) as usize;
        for t in ALL_TRANSFORMS {
            let Adds::Bytes { trigger, extra } = t.adds() else {
                continue;
            };
            for _ in 0..3000 {
                let len = below(24);
                let input: Vec<u8> = (0..len)
                    .map(|_| alphabet.get(below(alphabet.len())).copied().unwrap_or(b'a'))
                    .collect();
                let present = ByteSet::of(&input);
                if present.meets(&trigger) {
                    continue;
                }
                let output = t.apply(&input);
                for b in output {
                    assert!(
                        present.meets(&ByteSet::from_bytes(&[b]))
                            || extra.meets(&ByteSet::from_bytes(&[b])),
                        "{t:?} wrote {b:#04x} from {input:?}"
                    );
                }
            }
        }
    }

    /// What detectXSS values are made of in `validation_operators_flag_only_...`: markup that
    /// libinjection flags once assembled, and what separates it.
    const XSS_PIECES: [&[u8]; 24] = [
        b"<",
        b"=",
        b">",
        b"/",
        b" ",
        b"'",
        b"\"",
        b"`",
        b"!",
        b"?",
        b"-",
        b"x",
        b"script",
        b"svg",
        b"onerror",
        b"onload",
        b"style",
        b"href",
        b"javascript:",
        b"xmlns",
        b"!--",
        b"[if",
        b"import",
        b"DOCTYPE",
    ];

    #[test]
    fn a_present_table_gives_the_bytes_it_marks() {
        let mut next = xorshift(0xb17e5);
        for n in [0usize, 1, 3, 40, 256] {
            let value: Vec<u8> = (0..n).map(|i| (next() as u8) ^ (i as u8)).collect();
            let mut present = [0u8; 256];
            for &b in &value {
                present[usize::from(b)] = 1;
            }
            assert_eq!(
                ByteSet::of_present(&present),
                ByteSet::of(&value),
                "{value:?}"
            );
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(ByteSet::of_present(&[1; 256]), ByteSet::of(&all));
    }

    /// A value with none of the bytes `operator_needs` gives is not flagged by the operator.
    #[test]
    fn validation_operators_flag_only_values_with_a_needed_byte() {
        struct NoMacros;
        impl crate::operators::Expand for NoMacros {
            fn expand<'a>(&'a self, m: &'a crate::macros::Macro) -> std::borrow::Cow<'a, str> {
                std::borrow::Cow::Owned(format!("{m:?}"))
            }
        }
        let alphabet: &[u8] = b"aZ09 \t\x00\x01\x7f%fF+\xc3\xa9\x80\xbf\xe2\xff";
        let mut next = xorshift(0xdecade);
        let mut below = |n: usize| (next() % n as u64) as usize;
        let dir = std::path::Path::new(".");
        for spec in [
            "@validateByteRange 1-255",
            "@validateByteRange 32-126,9,10",
            "@validateByteRange 0-255",
            "@validateUrlEncoding",
            "@validateUtf8Encoding",
            "@detectXSS",
        ] {
            let (operator, _) = Operator::parse(spec, dir).unwrap_or_else(|e| panic!("{e}"));
            let Some(needs) = operator_needs(&operator) else {
                panic!("{spec}: no needed bytes");
            };
            let mut flagged = 0;
            for i in 0..20_000 {
                // Bytes, or (for detectXSS) pieces of markup, every other value without `<`.
                let value: Vec<u8> = if spec == "@detectXSS" {
                    let mut v = Vec::new();
                    for _ in 0..below(6) {
                        let piece = XSS_PIECES.get(below(XSS_PIECES.len())).copied();
                        v.extend_from_slice(piece.unwrap_or(b"x"));
                    }
                    if i % 2 == 0 {
                        v.retain(|&b| b != b'<');
                    }
                    v
                } else {
                    (0..below(8))
                        .map(|_| alphabet.get(below(alphabet.len())).copied().unwrap_or(b'a'))
                        .collect()
                };
                let hit = operator.evaluate(&value, &NoMacros, None);
                flagged += usize::from(hit);
                assert!(needs.found_in(&value) || !hit, "{spec} flags {value:?}");
            }
            // The generated values exercise the operator (0-255 flags nothing).
            assert!(flagged > 0 || spec.ends_with("0-255"), "{spec}");
        }
    }

    /// The one-set answer agrees with the step-by-step one on generated chains and values.
    #[test]
    fn reach_set_agrees_with_the_step_by_step_answer() {
        let alphabet: &[u8] = b"aZ0 %+&\\(._\xc3";
        let mut next = xorshift(0xc0ffee);
        let mut below = |n: usize| (next() % n as u64) as usize;
        for _ in 0..20_000 {
            let chain: Vec<Transform> = (0..below(4))
                .map(|_| ALL_TRANSFORMS.get(below(ALL_TRANSFORMS.len())).copied())
                .map(|t| t.unwrap_or(Transform::Trim))
                .collect();
            let wanted = ByteSet::from_bytes(if below(2) == 0 { b"(" } else { b" ." });
            let Some(danger) = reach_set(chain.iter().copied(), &wanted) else {
                continue;
            };
            let value: Vec<u8> = (0..below(6))
                .map(|_| alphabet.get(below(alphabet.len())).copied().unwrap_or(b'a'))
                .collect();
            assert_eq!(
                danger.found_in(&value),
                may_reach(&value, chain.iter().copied(), &wanted),
                "{chain:?} {value:?}"
            );
        }
    }

    #[test]
    fn a_later_decoder_is_reached_only_through_its_trigger() {
        use Transform::*;
        let paren = ByteSet::from_bytes(b"(");
        let chain = [UrlDecodeUni, JsDecode, RemoveWhitespace];
        assert!(!may_reach(b"plain words", chain.into_iter(), &paren));
        assert!(may_reach(b"a%28b", chain.into_iter(), &paren));
        assert!(may_reach(b"a\\x28b", chain.into_iter(), &paren));
        assert!(may_reach(b"f(x)", chain.into_iter(), &paren));
        assert!(may_reach(b"plain", [Base64Decode].into_iter(), &paren));
        // cmdLine adds spaces and lower-case letters only.
        assert!(!may_reach(b"A,B", [CmdLine].into_iter(), &paren));
        assert!(may_reach(b"A,B", [CmdLine].into_iter(), &SPACE));
        // Nothing left to apply: the value's own bytes.
        assert!(!may_reach(b"a%28b", std::iter::empty(), &paren));
    }

    /// `found_in` tests eight bytes before each branch: a needed byte is found at every
    /// position of values of every length around those eights, and a value without one is
    /// passed over whatever its length.
    #[test]
    fn found_in_finds_a_byte_anywhere() {
        let set = ByteSet::from_bytes(b"(\xff");
        for len in 0..40 {
            let plain = vec![b'a'; len];
            assert!(!set.found_in(&plain), "{len}");
            for at in 0..len {
                for b in [b'(', 0xff] {
                    let mut v = plain.clone();
                    v[at] = b;
                    assert!(set.found_in(&v), "{b:#x} at {at} of {len}");
                }
                let mut v = plain.clone();
                v[at] = b')';
                assert!(!set.found_in(&v), "')' at {at} of {len}");
            }
        }
    }
}
