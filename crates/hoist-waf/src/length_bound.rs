//! How long a value can still become along the rest of a transformation chain.
//!
//! A multiMatch rule tests every step of its chain. CRS 934160 (`while[\s]*(...)`, at least
//! eight bytes long) runs base64Decode on each argument after urlDecodeUni and jsDecode, then
//! urlDecodeUni, jsDecode and replaceComments on what that decoded. ModSecurity decodes only
//! the alphabet bytes before the first other one, so "Some ordinary text" decodes "Some" to
//! three bytes, and none of the later steps makes a value longer: the length of that first run
//! alone says how long every later value can be. When that is shorter than the regex's
//! shortest match, neither the decoding nor any later step is computed (`ValueCache::steps`
//! takes the check; `length_point` says where it goes).
//!
//! Like `reach`, a description may claim less than a transformation can do ("it may
//! lengthen"), never more: a wrong "never lengthens" would lose a match. The tests run every
//! transformation said to never lengthen over escapes of every kind.

use crate::chains::{ChainId, Chains};
use crate::transforms::Transform;

impl Transform {
    /// Whether the output is never longer than the input, as `transforms` implements each:
    /// the decoders turn an escape into fewer bytes than it has, the others drop bytes or
    /// replace one byte (or a run, or a comment) with one.
    pub(crate) fn never_lengthens(self) -> bool {
        use Transform::*;
        match self {
            Lowercase | Uppercase | UrlDecode | UrlDecodeUni | HtmlEntityDecode | JsDecode
            | CssDecode | EscapeSeqDecode | RemoveNulls | ReplaceNulls | RemoveWhitespace
            | CompressWhitespace | ReplaceComments | RemoveComments | RemoveCommentsChar
            | CmdLine | Base64Decode | Base64DecodeExt | HexDecode | Trim | TrimLeft
            | TrimRight => true,
            // utf8toUnicode writes `%uXXXX` for two to four bytes; the encoders, length
            // ("0" for an empty value) and sha1 (twenty bytes) may write more than they read.
            // normalisePath is left out: nothing here needs it, and its rules are subtle.
            Utf8ToUnicode | UrlEncode | Base64Encode | HexEncode | Length | Sha1
            | NormalisePath | NormalisePathWin => false,
        }
    }
}

/// For a multiMatch rule's chain: the index in its path (`Chains::path`, the root first) of
/// the node just before its last base64Decode, when no step after that decoding lengthens a
/// value. A value at that node that decodes to fewer bytes than the regex's shortest match
/// (`decode::base64_decodes_at_least`) cannot let the decoding or any later step match.
/// `None` otherwise. It always comes before `reach::check_point`'s node, which is the
/// decoding's or a later one.
pub(crate) fn length_point(chains: &Chains, chain: ChainId) -> Option<usize> {
    let path = chains.path(chain);
    let transform = |n: &ChainId| chains.node(*n).transform;
    let at = path
        .iter()
        .rposition(|n| transform(n) == Some(Transform::Base64Decode))?;
    let later_keep_length = path
        .iter()
        .skip(at + 1)
        .filter_map(transform)
        .all(Transform::never_lengthens);
    // The root has no transformation, so a decoding is never at index 0.
    at.checked_sub(1).filter(|_| later_keep_length)
}

/// The fewest bytes a match of `pattern` has, as the `regex` crate parses it for a bytes
/// regex (the operator's own flags are part of `pattern`); `None` when it does not parse
/// or can match the empty string.
pub(crate) fn regex_min_len(pattern: &str) -> Option<usize> {
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    hir.properties().minimum_len().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::xorshift;

    /// Bytes and escapes that each decoder turns into something else.
    const PIECES: [&[u8]; 40] = [
        b"a",
        b"Z",
        b"0",
        b"f",
        b" ",
        b"\t",
        b"\0",
        b"+",
        b"%",
        b"%4",
        b"%41",
        b"%u",
        b"%uff01",
        b"%u00e9",
        b"%u1",
        b"&",
        b"&#",
        b"&#x",
        b"&#x10ffff;",
        b"&#1114111;",
        b"&eacute;",
        b"&lt",
        b";",
        b"\\",
        b"\\u00e9",
        b"\\uff01",
        b"\\x41",
        b"\\101",
        b"\\0",
        b"\\c3",
        b"/*",
        b"*/",
        b"--",
        b"#",
        b"/",
        b".",
        b"'",
        b"^",
        b",",
        b"\xc3\xa9",
    ];

    #[test]
    fn transformations_said_to_never_lengthen_never_do() {
        let mut next = xorshift(0x1e57);
        for t in crate::transforms::ALL {
            if !t.never_lengthens() {
                continue;
            }
            for _ in 0..4000 {
                let n = (next() % 8) as usize;
                let input: Vec<u8> = (0..n)
                    .flat_map(|_| PIECES[(next() % PIECES.len() as u64) as usize].iter())
                    .copied()
                    .collect();
                let output = t.apply(&input);
                assert!(
                    output.len() <= input.len(),
                    "{t:?} lengthened {input:?} to {output:?}"
                );
            }
        }
    }

    #[test]
    fn the_check_sits_before_the_last_decoding_when_nothing_after_lengthens() {
        use Transform::*;
        let mut chains = Chains::default();
        let mut point = |ts: &[Transform]| {
            let chain = chains.intern(ts);
            length_point(&chains, chain)
        };
        // 934160's chain: checked on jsDecode's value (the root is index 0).
        let crs = [
            UrlDecodeUni,
            JsDecode,
            Base64Decode,
            UrlDecodeUni,
            JsDecode,
            ReplaceComments,
        ];
        assert_eq!(point(&crs), Some(2));
        // A first decoding is checked on the value as collected; nothing is checked when a
        // later step may lengthen.
        assert_eq!(point(&[Base64Decode, UrlDecodeUni]), Some(0));
        assert_eq!(point(&[UrlDecodeUni, Base64Decode, Utf8ToUnicode]), None);
        assert_eq!(point(&[UrlDecodeUni, Base64Decode]), Some(1));
        // The last decoding counts: the first's output may be lengthened by the second's.
        assert_eq!(
            point(&[UrlDecodeUni, Base64Decode, JsDecode, Base64Decode]),
            Some(3)
        );
        assert_eq!(point(&[UrlDecodeUni, JsDecode]), None);
    }

    #[test]
    fn shortest_matches() {
        assert_eq!(regex_min_len(r"(?s-u)while[\s\x0b]*\("), Some(6));
        assert_eq!(regex_min_len(r"(?s-u)(?:env|require)\["), Some(4));
        assert_eq!(regex_min_len(r"(?s-u)a*"), None);
        assert_eq!(regex_min_len(r"(?s-u)(?i)k"), Some(1));
        assert_eq!(regex_min_len(r"(?s)\p{Greek}"), Some(2));
        assert_eq!(regex_min_len(r"("), None);
    }
}
