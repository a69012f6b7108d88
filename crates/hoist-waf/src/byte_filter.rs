//! A regex's required punctuation: a few ASCII bytes, one of which every match contains,
//! read off the regex's syntax tree at load.
//!
//! A multiMatch rule runs its regex on every step of its chain that changes the value, and
//! no prefilter scan has seen most of those steps (CRS 934100 searches each value after
//! `removeWhitespace` and after `base64Decode`, whose output no other rule reads). The
//! regex's own prefilter for 934100 is an automaton over ~60 literals; a value without any
//! of `_ ( . : [` cannot match, which a byte-table pass tells at a fraction of that cost.
//! Only non-alphanumeric ASCII bytes are used: ordinary words would meet letters, and
//! ASCII punctuation has no other case, whatever flags the regex has.

use regex_syntax::hir::{Class, Hir, HirKind};

/// Most bytes a filter may have: with more it rules out too few values to pay.
const MAX_BYTES: u32 = 8;

/// A set of ASCII punctuation bytes of which every match of a regex contains one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteFilter {
    /// Bit `b` of the 128-bit set: byte `b` is one of them.
    bits: u128,
}

impl ByteFilter {
    /// The filter of `pattern` (as the `regex` crate parses it for a bytes regex), when
    /// every match needs one of at most `MAX_BYTES` punctuation bytes.
    pub(crate) fn of_regex(pattern: &str) -> Option<ByteFilter> {
        let hir = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(pattern)
            .ok()?;
        let bits = required(&hir)?;
        (bits.count_ones() <= MAX_BYTES).then_some(ByteFilter { bits })
    }

    /// The filter's bytes.
    pub(crate) fn bytes(&self) -> crate::reach::ByteSet {
        crate::reach::ByteSet::from_ascii_bits(self.bits)
    }

    /// False when `value` holds none of the bytes: the regex cannot match it.
    pub(crate) fn may_match(&self, value: &[u8]) -> bool {
        self.bytes().found_in(value)
    }

    /// Whether `t`'s output lacks the bytes whenever its input does: it only removes bytes,
    /// or adds others, whatever the input holds (`reach::Adds`). Then a multiMatch step by
    /// `t` after a value the filter ruled out is ruled out too, unread.
    pub(crate) fn kept_out_by(&self, t: crate::transforms::Transform) -> bool {
        match t.adds() {
            crate::reach::Adds::Bytes { trigger, extra } => {
                trigger == crate::reach::ByteSet::default() && !extra.meets(&self.bytes())
            }
            crate::reach::Adds::Anything => false,
        }
    }
}

/// Whether a byte may stand for a requirement: ASCII, neither a letter, a digit nor
/// whitespace (which ordinary text is full of).
fn usable(b: u8) -> bool {
    b.is_ascii() && !b.is_ascii_alphanumeric() && !b.is_ascii_whitespace()
}

/// A set of usable bytes one of which every match of `h` contains; `None` when there is
/// none (it may match the empty string, or only through letters, digits or wide classes).
fn required(h: &Hir) -> Option<u128> {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Literal(lit) => lit.0.iter().find(|&&b| usable(b)).map(|&b| 1u128 << b),
        HirKind::Class(class) => class_bits(class),
        HirKind::Capture(c) => required(&c.sub),
        HirKind::Repetition(r) if r.min >= 1 => required(&r.sub),
        HirKind::Repetition(_) => None,
        // Any one part's requirement holds for the whole; the one with the fewest bytes
        // rules out the most.
        HirKind::Concat(subs) => subs
            .iter()
            .filter_map(required)
            .min_by_key(|bits| bits.count_ones()),
        // Every branch must have one; a match meets one branch's.
        HirKind::Alternation(subs) => subs
            .iter()
            .try_fold(0u128, |acc, s| Some(acc | required(s)?)),
    }
}

/// The class's members when all are usable bytes (and few).
fn class_bits(class: &Class) -> Option<u128> {
    let ranges: Vec<(u32, u32)> = match class {
        Class::Bytes(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
        Class::Unicode(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
    };
    let mut bits = 0u128;
    for (start, end) in ranges {
        if end >= 128 || end - start >= MAX_BYTES {
            return None;
        }
        for b in start..=end {
            let b = u8::try_from(b).ok()?;
            if !usable(b) {
                return None;
            }
            bits |= 1u128 << b;
        }
    }
    Some(bits).filter(|&b| b != 0)
}

#[cfg(test)]
mod tests {
    use super::ByteFilter;

    fn bytes_of(pattern: &str) -> Option<Vec<u8>> {
        let f = ByteFilter::of_regex(pattern)?;
        Some((0u8..128).filter(|&b| f.bits & (1u128 << b) != 0).collect())
    }

    #[test]
    fn punctuation_every_branch_needs() {
        assert_eq!(
            bytes_of(r"(?s-u)eval\(|this\.constructor"),
            Some(b"(.".to_vec())
        );
        // The concatenation's rarest part: `:` alone rather than nothing.
        assert_eq!(bytes_of(r"(?s-u)module:prototype"), Some(b":".to_vec()));
        assert_eq!(bytes_of(r"(?s-u)a[\[\]]b"), Some(b"[]".to_vec()));
    }

    #[test]
    fn nothing_when_a_branch_is_only_words_or_may_be_absent() {
        assert_eq!(bytes_of(r"(?s-u)eval\(|process"), None);
        assert_eq!(bytes_of(r"(?s-u)a\.?b"), None);
        assert_eq!(bytes_of(r"(?s-u)x[^a-z]y"), None);
        assert_eq!(bytes_of(r"(?s-u)a[0-9]b"), None);
    }

    /// Steps that only remove bytes, or add none of the filter's whatever their input,
    /// keep a value without them without; a trigger or an added filter byte does not.
    #[test]
    fn steps_that_keep_filter_bytes_out() {
        use crate::transforms::Transform::*;
        let f = ByteFilter::of_regex(r"(?s-u)a/b|c\(d").unwrap();
        for t in [
            RemoveWhitespace,
            RemoveNulls,
            Trim,
            CompressWhitespace,
            Lowercase,
            CmdLine,
        ] {
            assert!(f.kept_out_by(t), "{t:?}");
        }
        // `\` becomes `/`; `%2f`, `\x2f`, `&#47;` and base64 can make anything.
        for t in [
            NormalisePathWin,
            UrlDecodeUni,
            JsDecode,
            HtmlEntityDecode,
            Base64Decode,
        ] {
            assert!(!f.kept_out_by(t), "{t:?}");
        }
        let g = ByteFilter::of_regex(r"(?s-u)c\(d").unwrap();
        assert!(g.kept_out_by(NormalisePathWin));
    }

    #[test]
    fn case_insensitivity_keeps_punctuation() {
        assert_eq!(bytes_of(r"(?is-u)ABC\(D"), Some(b"(".to_vec()));
    }

    /// Agreement with the regex on generated values: a "no" is never a match.
    #[test]
    fn no_means_the_regex_does_not_match() {
        let pattern = r"(?s-u)_(?:\$\$ND_FUNC\$\$_|_js_function)|(?:\beval|new[\s\x0b]+Function[\s\x0b]*)\(|String\.fromCharCode|this\.constructor|require\[";
        let f = ByteFilter::of_regex(pattern).expect("a filter");
        let re = regex::bytes::Regex::new(pattern).expect("compiles");
        let pieces: &[&[u8]] = &[
            b"eval",
            b"(",
            b"new",
            b" ",
            b"\x0b",
            b"Function",
            b"String",
            b".",
            b"fromCharCode",
            b"this",
            b"constructor",
            b"require",
            b"[",
            b"_",
            b"$$ND_FUNC$$_",
            b"_js_function",
            b"x",
            b"9",
        ];
        let mut next = crate::test_rng::xorshift(0x2545_F491_4F6C_DD1D);
        let (mut matches, mut ruled_out) = (0, 0);
        for _ in 0..20_000 {
            let mut v = Vec::new();
            for _ in 0..(next() % 6) {
                v.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
            }
            if re.is_match(&v) {
                matches += 1;
                assert!(f.may_match(&v), "{:?}", String::from_utf8_lossy(&v));
            }
            ruled_out += usize::from(!f.may_match(&v));
        }
        assert!(matches > 100 && ruled_out > 1000, "{matches} {ruled_out}");
        assert!(!f.may_match(b"Someordinarytextwithwords"));
    }
}
