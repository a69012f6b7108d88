//! How long a value can still become along the rest of a transformation chain.
//!
//! A multiMatch rule tests every step of its chain. CRS 934160 (`while[\s]*(...)`, at least
//! eight bytes long) runs base64Decode on each argument after urlDecodeUni and jsDecode, then
//! urlDecodeUni, jsDecode and replaceComments on what that decoded. ModSecurity decodes only
//! the alphabet bytes before the first other one, so "Some ordinary text" decodes "Some" to
//! three bytes, and none of the later steps makes a value longer: the length of that first run
//! alone says how long every later value can be. When the steps before the decoding leave
//! the value as it is (its hit-keeping mask says so: no `%`, no `\`), that run is the value's
//! own, read before anything is computed; when it is shorter than the regex's shortest
//! match, the value as collected is the only one to test (the multiMatch arm in `eval`).
//!
//! (Checking the decoding's input as one more step of `ValueCache::steps` worked too, but
//! cost 934100, whose removeWhitespace'd values always pass, more than 934160 saved.)
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

/// For a multiMatch rule's chain: the transformations (`Chains::mask`) before its last
/// base64Decode, when no step after that decoding lengthens a value. A value those steps
/// leave as it is, and whose decoding (`decode::starts_with_base64_run`) is shorter than the
/// regex's shortest match, cannot let the decoding or any later step match. `None`
/// otherwise.
pub(crate) fn before_decoding(chains: &Chains, chain: ChainId) -> Option<u64> {
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
    // The root (index 0) has no transformation, so the decoding has a node before it.
    let before = *path.get(at.checked_sub(1)?)?;
    later_keep_length.then(|| chains.mask(before))
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
    fn the_steps_before_the_last_decoding_when_nothing_after_lengthens() {
        use Transform::*;
        let mut chains = Chains::default();
        let mut before = |ts: &[Transform]| {
            let chain = chains.intern(ts);
            before_decoding(&chains, chain)
        };
        let bits = |ts: &[Transform]| ts.iter().fold(0, |m, t| m | t.bit());
        // 934160's chain.
        let crs = [
            UrlDecodeUni,
            JsDecode,
            Base64Decode,
            UrlDecodeUni,
            JsDecode,
            ReplaceComments,
        ];
        assert_eq!(before(&crs), Some(bits(&[UrlDecodeUni, JsDecode])));
        // A first decoding has nothing before it; nothing is said when a later step may
        // lengthen.
        assert_eq!(before(&[Base64Decode, UrlDecodeUni]), Some(0));
        assert_eq!(before(&[UrlDecodeUni, Base64Decode, Utf8ToUnicode]), None);
        // The last decoding counts: the first's output may be lengthened by the second's.
        assert_eq!(
            before(&[UrlDecodeUni, Base64Decode, JsDecode, Base64Decode]),
            Some(bits(&[UrlDecodeUni, Base64Decode, JsDecode]))
        );
        assert_eq!(before(&[UrlDecodeUni, JsDecode]), None);
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
