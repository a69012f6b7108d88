//! Transformations (`t:`), byte to byte as in ModSecurity: inputs are not assumed to be UTF-8
//! and decoders leave malformed escapes as they are rather than failing.

use crate::decode::{
    base64_decode, css_decode, escape_seq_decode, hex_decode, html_entity_decode, js_decode,
    url_decode, url_encode, utf8_to_unicode,
};
use base64::Engine;
use sha1::Digest;
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    Lowercase,
    Uppercase,
    UrlDecode,
    UrlDecodeUni,
    UrlEncode,
    HtmlEntityDecode,
    JsDecode,
    CssDecode,
    Utf8ToUnicode,
    RemoveNulls,
    ReplaceNulls,
    RemoveWhitespace,
    CompressWhitespace,
    ReplaceComments,
    RemoveComments,
    RemoveCommentsChar,
    CmdLine,
    NormalisePath,
    NormalisePathWin,
    EscapeSeqDecode,
    Base64Decode,
    Base64DecodeExt,
    Base64Encode,
    HexEncode,
    HexDecode,
    Length,
    Sha1,
    Trim,
    TrimLeft,
    TrimRight,
}

impl Transform {
    /// Number of variants (`TrimRight` is the last): per-value tables index by `t as usize`.
    pub const COUNT: usize = Transform::TrimRight as usize + 1;
    const _FITS_A_MASK: () = assert!(Transform::COUNT <= 64);

    /// `Ok(None)` is `t:none`, which clears the list built so far.
    pub fn parse(name: &str) -> Result<Option<Transform>, String> {
        use Transform::*;
        Ok(Some(match name.to_ascii_lowercase().as_str() {
            "none" => return Ok(None),
            "lowercase" => Lowercase,
            "uppercase" => Uppercase,
            "urldecode" => UrlDecode,
            "urldecodeuni" => UrlDecodeUni,
            "urlencode" => UrlEncode,
            "htmlentitydecode" => HtmlEntityDecode,
            "jsdecode" => JsDecode,
            "cssdecode" => CssDecode,
            "utf8tounicode" => Utf8ToUnicode,
            "removenulls" => RemoveNulls,
            "replacenulls" => ReplaceNulls,
            "removewhitespace" => RemoveWhitespace,
            "compresswhitespace" => CompressWhitespace,
            "replacecomments" => ReplaceComments,
            "removecomments" => RemoveComments,
            "removecommentschar" => RemoveCommentsChar,
            "cmdline" => CmdLine,
            "normalisepath" | "normalizepath" => NormalisePath,
            "normalisepathwin" | "normalizepathwin" => NormalisePathWin,
            "escapeseqdecode" => EscapeSeqDecode,
            "base64decode" => Base64Decode,
            "base64decodeext" => Base64DecodeExt,
            "base64encode" => Base64Encode,
            "hexencode" => HexEncode,
            "hexdecode" => HexDecode,
            "length" => Length,
            "sha1" => Sha1,
            "trim" => Trim,
            "trimleft" => TrimLeft,
            "trimright" => TrimRight,
            other => return Err(format!("unknown transformation {other}")),
        }))
    }

    /// True when `apply` would return the input unchanged: lets the engine skip the copy, as
    /// most values in most rules hold nothing to decode.
    pub fn is_noop_for(self, input: &[u8]) -> bool {
        use Transform::*;
        let has = |b: u8| input.contains(&b);
        match self {
            Lowercase => !input.iter().any(u8::is_ascii_uppercase),
            Uppercase => !input.iter().any(u8::is_ascii_lowercase),
            UrlDecode | UrlDecodeUni => !has(b'%') && !has(b'+'),
            HtmlEntityDecode => !has(b'&'),
            JsDecode | CssDecode | EscapeSeqDecode => !has(b'\\'),
            Utf8ToUnicode => input.is_ascii(),
            RemoveNulls | ReplaceNulls => !has(0),
            RemoveWhitespace => !input.iter().any(|&b| is_space(b)),
            CompressWhitespace => {
                !input.iter().any(|&b| is_space(b) && b != b' ')
                    && !input.windows(2).any(|w| w == b"  ")
            }
            ReplaceComments => find(input, b"/*").is_none(),
            RemoveCommentsChar => !input.iter().any(|b| matches!(b, b'/' | b'*' | b'-' | b'#')),
            NormalisePath => !has(b'.') && find(input, b"//").is_none(),
            NormalisePathWin => !has(b'.') && !has(b'\\') && find(input, b"//").is_none(),
            Trim | TrimLeft | TrimRight => {
                input.first().is_none_or(|&b| !is_space(b))
                    && input.last().is_none_or(|&b| !is_space(b))
            }
            _ => false,
        }
    }

    /// This transformation's bit in a mask of transformations.
    pub const fn bit(self) -> u64 {
        1 << (self as u32)
    }

    pub fn apply(self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.apply_into(input, &mut out);
        out
    }

    /// `apply`, into `out` (cleared first): the value cache passes buffers kept from earlier
    /// transactions, so a transformed value costs no allocation once the pool is warm.
    pub(crate) fn apply_into(self, input: &[u8], out: &mut Vec<u8>) {
        use Transform::*;
        out.clear();
        match self {
            Lowercase => out.extend(input.iter().map(u8::to_ascii_lowercase)),
            Uppercase => out.extend(input.iter().map(u8::to_ascii_uppercase)),
            UrlDecode => url_decode(input, false, out),
            UrlDecodeUni => url_decode(input, true, out),
            UrlEncode => url_encode(input, out),
            HtmlEntityDecode => html_entity_decode(input, out),
            JsDecode => js_decode(input, out),
            CssDecode => css_decode(input, out),
            Utf8ToUnicode => utf8_to_unicode(input, out),
            RemoveNulls => filtered(input, |b| b != 0, out),
            ReplaceNulls => out.extend(input.iter().map(|&b| if b == 0 { b' ' } else { b })),
            RemoveWhitespace => filtered(input, |b| !is_space(b), out),
            CompressWhitespace => compress_whitespace(input, out),
            ReplaceComments => replace_comments(input, out),
            RemoveComments => remove_comments(input, out),
            RemoveCommentsChar => remove_comments_char(input, out),
            CmdLine => cmd_line(input, out),
            NormalisePath => normalise_path(input, false, out),
            NormalisePathWin => normalise_path(input, true, out),
            EscapeSeqDecode => escape_seq_decode(input, out),
            Base64Decode => base64_decode(input, false, out),
            Base64DecodeExt => base64_decode(input, true, out),
            Base64Encode => out.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(input)
                    .as_bytes(),
            ),
            HexEncode => hex_encode(input, out),
            HexDecode => hex_decode(input, out),
            Length => out.extend_from_slice(input.len().to_string().as_bytes()),
            Sha1 => out.extend_from_slice(&sha1::Sha1::digest(input)),
            Trim => out.extend_from_slice(trim_right(trim_left(input))),
            TrimLeft => out.extend_from_slice(trim_left(input)),
            TrimRight => out.extend_from_slice(trim_right(input)),
        }
    }
}

/// The bytes of `input` that `keep`, appended to `out`. Every byte is written and the end
/// advances only past the kept ones, with no branch per byte: `extend` from a filter pushed
/// byte by byte (a 1 KB response body under removeWhitespace, CRS 955300, was ~8
/// instructions a byte).
pub(crate) fn filtered(input: &[u8], keep: impl Fn(u8) -> bool, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + input.len(), 0);
    let mut end = start;
    if let Some(room) = out.get_mut(start..) {
        let mut n = 0;
        for &b in input {
            if let Some(slot) = room.get_mut(n) {
                *slot = b;
            }
            n += usize::from(keep(b));
        }
        end += n;
    }
    out.truncate(end);
}

/// ModSecurity's whitespace: C isspace plus NBSP (0xa0), which browsers treat as a space.
/// A table: one load per byte, where the comparisons took six instructions (removeWhitespace
/// runs on every argument of a form under several CRS chains).
pub(crate) const fn is_space(b: u8) -> bool {
    SPACES[b as usize]
}

const SPACES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = matches!(b as u8, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0xa0);
        b += 1;
    }
    t
};

fn compress_whitespace(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut in_space = false;
    for &b in input {
        if is_space(b) {
            if !in_space {
                out.push(b' ');
            }
            in_space = true;
        } else {
            out.push(b);
            in_space = false;
        }
    }
}

fn replace_comments(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i..].starts_with(b"/*") {
            match find(&input[i + 2..], b"*/") {
                Some(end) => i += 2 + end + 2,
                None => i = input.len(),
            }
            out.push(b' ');
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
}

fn remove_comments(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut i = 0;
    while i < input.len() {
        let rest = &input[i..];
        if rest.starts_with(b"/*") {
            i = find(&input[i + 2..], b"*/").map_or(input.len(), |e| i + 2 + e + 2);
        } else if rest.starts_with(b"<!--") {
            i = find(&input[i + 4..], b"-->").map_or(input.len(), |e| i + 4 + e + 3);
        } else if rest.starts_with(b"--") || rest[0] == b'#' {
            // Line comments run to the end of the value.
            break;
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
}

fn remove_comments_char(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut i = 0;
    while i < input.len() {
        let rest = &input[i..];
        // `-->` before `--`, or the `>` of an HTML comment end would survive.
        if rest.starts_with(b"<!--") {
            i += 4;
        } else if rest.starts_with(b"-->") {
            i += 3;
        } else if rest.starts_with(b"/*") || rest.starts_with(b"*/") || rest.starts_with(b"--") {
            i += 2;
        } else if rest[0] == b'#' {
            i += 1;
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Undoes shell obfuscation: drops `\ " ' ^`, turns `,` `;` and whitespace into one space,
/// removes spaces before `/` and `(`, and lowercases.
fn cmd_line(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    let mut space = false;
    for &b in input {
        match b {
            b'\\' | b'"' | b'\'' | b'^' => {}
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | b',' | b';' => {
                if !space {
                    out.push(b' ');
                    space = true;
                }
            }
            b'/' | b'(' => {
                if space {
                    out.pop();
                }
                space = false;
                out.push(b);
            }
            _ => {
                space = false;
                out.push(b.to_ascii_lowercase());
            }
        }
    }
}

fn normalise_path(input: &[u8], windows: bool, out: &mut Vec<u8>) {
    if input.is_empty() {
        return;
    }
    let src: Cow<'_, [u8]> = if windows && input.contains(&b'\\') {
        Cow::Owned(
            input
                .iter()
                .map(|&b| if b == b'\\' { b'/' } else { b })
                .collect(),
        )
    } else {
        Cow::Borrowed(input)
    };
    let absolute = src.first() == Some(&b'/');
    let trailing = src.last() == Some(&b'/') || src.ends_with(b"/.") || src.ends_with(b"/..");
    let mut segments: Vec<&[u8]> = Vec::new();
    for seg in src.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                if segments.last().is_some_and(|s| *s != b"..") {
                    segments.pop();
                } else if !absolute {
                    segments.push(seg);
                }
            }
            _ => segments.push(seg),
        }
    }
    out.reserve(src.len());
    if absolute {
        out.push(b'/');
    }
    for (i, seg) in segments.iter().enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(seg);
    }
    if trailing && !segments.is_empty() {
        out.push(b'/');
    }
}

fn hex_encode(input: &[u8], out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(2 * input.len());
    out.extend(
        input
            .iter()
            .flat_map(|&b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]),
    );
}

fn trim_left(input: &[u8]) -> &[u8] {
    let start = input
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(input.len());
    &input[start..]
}

fn trim_right(input: &[u8]) -> &[u8] {
    let end = input
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(0, |p| p + 1);
    &input[..end]
}

/// Every transformation, for tests that check a property of each.
#[cfg(test)]
pub(crate) const ALL: [Transform; Transform::COUNT] = {
    use Transform::*;
    [
        Lowercase,
        Uppercase,
        UrlDecode,
        UrlDecodeUni,
        UrlEncode,
        HtmlEntityDecode,
        JsDecode,
        CssDecode,
        Utf8ToUnicode,
        RemoveNulls,
        ReplaceNulls,
        RemoveWhitespace,
        CompressWhitespace,
        ReplaceComments,
        RemoveComments,
        RemoveCommentsChar,
        CmdLine,
        NormalisePath,
        NormalisePathWin,
        EscapeSeqDecode,
        Base64Decode,
        Base64DecodeExt,
        Base64Encode,
        HexEncode,
        HexDecode,
        Length,
        Sha1,
        Trim,
        TrimLeft,
        TrimRight,
    ]
};
