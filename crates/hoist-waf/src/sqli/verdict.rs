//! The verdict on one pass: the fingerprint must be on libinjection's blacklist, and then not
//! be one of the small cases libinjection lets through (its "whitelist"), which tell common
//! text from injections by looking at the tokens and the input themselves.

use super::fold::Folded;
use super::keywords::is_blacklisted;
use super::token::kind;

/// At most five folded tokens plus a trailing comment, and the evil case's six: 8 is room.
#[derive(Clone, Copy)]
pub(crate) struct Fingerprint {
    bytes: [u8; 8],
    len: usize,
}

impl Fingerprint {
    /// The folded tokens' kinds; any evil token makes the whole fingerprint `X`.
    pub(super) fn of(folded: &Folded) -> Fingerprint {
        let mut fp = Fingerprint {
            bytes: [0; 8],
            len: 0,
        };
        for (dst, t) in fp
            .bytes
            .iter_mut()
            .zip(folded.tokens.iter().take(folded.count))
        {
            *dst = t.kind;
            fp.len += 1;
        }
        if fp.as_bytes().contains(&kind::EVIL) {
            fp.bytes = [0; 8];
            fp.bytes[0] = kind::EVIL;
            fp.len = 1;
        }
        fp
    }

    /// The fingerprint of one token of kind `kind`.
    pub(super) fn one(kind: u8) -> Fingerprint {
        let mut bytes = [0; 8];
        bytes[0] = kind;
        Fingerprint { bytes, len: 1 }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// Whether this pass finds an injection.
pub(super) fn is_injection(input: &[u8], fp: &Fingerprint, folded: &Folded) -> bool {
    is_blacklisted(fp.as_bytes()) && !is_whitelisted(input, fp.as_bytes(), folded)
}

fn is_whitelisted(input: &[u8], fp: &[u8], folded: &Folded) -> bool {
    // `sp_password` in a trailing comment hides the query from SQL Server's logs.
    if fp.len() > 1 && fp.last() == Some(&kind::COMMENT) && mentions_sp_password(input) {
        return false;
    }
    let t = &folded.tokens;
    let unfolded = |n| folded.tokens_seen == n;
    match *fp {
        // Two tokens: very short injections are hard to tell from text.
        [_, kind::UNION] => unfolded(2),
        [a, kind::COMMENT] => {
            let comment = t[1].first();
            if comment == b'#' {
                return true;
            }
            // `word --` and `word #` are text; `word /*` is not.
            if a == kind::BAREWORD && comment != b'/' {
                return true;
            }
            if a == kind::NUMBER {
                if comment == b'/' || folded.tokens_seen > 2 {
                    return false;
                }
                return !number_then_comment(input, t[0].len());
            }
            // `1--` ends the input: an injection scan; `x-- more` is text.
            t[1].len() > 2 && comment == b'-'
        }
        [_, _] => t[1].first() == b'#' || (t[1].len() > 2 && t[1].first() == b'-'),
        // Three tokens.
        [kind::STRING, kind::OPERATOR | kind::LOGIC, kind::STRING] => {
            // `...foo' + 'bar...`: both strings open into the input's edges.
            !(t[0].open == 0 && t[2].close == 0 && t[0].close == t[2].open)
        }
        [_, _, _] => {
            let small_and = matches!(fp, b"s&n" | b"n&1" | b"1&1" | b"1&v" | b"1&s");
            if small_and && unfolded(3) {
                // `sexy and 17`, not `sexy and 17<18`.
                return true;
            }
            // A keyword in the middle: text, unless MySQL's `INTO OUTFILE`/`DUMPFILE`
            // (case-sensitive, as libinjection compares it).
            t[1].kind == kind::KEYWORD && !(t[1].len() >= 5 && t[1].text().starts_with(b"INTO"))
        }
        _ => false,
    }
}

/// `1 --`, `1/*`, `1--`: a number followed directly by a space or comment. libinjection
/// looks at the byte at the number's length from the input's start, not from the number's
/// start (a bug in C kept by libinjectionrs), and reads bytes as signed chars.
fn number_then_comment(input: &[u8], at: usize) -> bool {
    match (input.get(at), input.get(at + 1)) {
        (Some(&b), _) if b <= 32 || b >= 0x80 => true,
        (Some(b'/'), Some(b'*')) | (Some(b'-'), Some(b'-')) => true,
        _ => false,
    }
}

/// Whether the input, when it is UTF-8 (libinjectionrs only looks then), contains
/// `sp_password` in any case.
fn mentions_sp_password(input: &[u8]) -> bool {
    std::str::from_utf8(input).is_ok()
        && input
            .windows(11)
            .any(|w| w.eq_ignore_ascii_case(b"sp_password"))
}
