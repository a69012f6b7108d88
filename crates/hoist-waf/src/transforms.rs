//! Transformations (`t:`), byte to byte as in ModSecurity: inputs are not assumed to be UTF-8
//! and decoders leave malformed escapes as they are rather than failing.

use base64::Engine;
use sha1::Digest;

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

    pub fn apply(self, input: &[u8]) -> Vec<u8> {
        use Transform::*;
        match self {
            Lowercase => input.to_ascii_lowercase(),
            Uppercase => input.to_ascii_uppercase(),
            UrlDecode => url_decode(input, false),
            UrlDecodeUni => url_decode(input, true),
            UrlEncode => url_encode(input),
            HtmlEntityDecode => html_entity_decode(input),
            JsDecode => js_decode(input),
            CssDecode => css_decode(input),
            Utf8ToUnicode => utf8_to_unicode(input),
            RemoveNulls => input.iter().copied().filter(|&b| b != 0).collect(),
            ReplaceNulls => input
                .iter()
                .map(|&b| if b == 0 { b' ' } else { b })
                .collect(),
            RemoveWhitespace => input.iter().copied().filter(|&b| !is_space(b)).collect(),
            CompressWhitespace => compress_whitespace(input),
            ReplaceComments => replace_comments(input),
            RemoveComments => remove_comments(input),
            RemoveCommentsChar => remove_comments_char(input),
            CmdLine => cmd_line(input),
            NormalisePath => normalise_path(input, false),
            NormalisePathWin => normalise_path(input, true),
            EscapeSeqDecode => escape_seq_decode(input),
            Base64Decode => base64_decode(input, false),
            Base64DecodeExt => base64_decode(input, true),
            Base64Encode => base64::engine::general_purpose::STANDARD
                .encode(input)
                .into_bytes(),
            HexEncode => hex_encode(input),
            HexDecode => hex_decode(input),
            Length => input.len().to_string().into_bytes(),
            Sha1 => sha1::Sha1::digest(input).to_vec(),
            Trim => trim_right(trim_left(input)).to_vec(),
            TrimLeft => trim_left(input).to_vec(),
            TrimRight => trim_right(input).to_vec(),
        }
    }
}

/// ModSecurity's whitespace: C isspace plus NBSP (0xa0), which browsers treat as a space.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0xa0)
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn hex2(a: u8, b: u8) -> Option<u8> {
    Some(hex_val(a)? << 4 | hex_val(b)?)
}

/// A `%uHHHH`/`\uHHHH` code point reduced to one byte: full-width ASCII (U+FF01..U+FF5E) maps
/// to its ASCII twin, anything else keeps its low byte, as ModSecurity's default unicode map.
fn unicode_to_byte(code: u32) -> u8 {
    if (0xff01..=0xff5e).contains(&code) {
        (code - 0xfee0) as u8
    } else {
        (code & 0xff) as u8
    }
}

fn hex4(s: &[u8]) -> Option<u32> {
    if s.len() < 4 {
        return None;
    }
    s[..4]
        .iter()
        .try_fold(0u32, |acc, &b| Some(acc << 4 | u32::from(hex_val(b)?)))
}

pub fn url_decode(input: &[u8], uni: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                if uni && matches!(input.get(i + 1), Some(b'u' | b'U')) {
                    if let Some(code) = hex4(&input[(i + 2).min(input.len())..]) {
                        out.push(unicode_to_byte(code));
                        i += 6;
                        continue;
                    }
                }
                match (input.get(i + 1), input.get(i + 2)) {
                    (Some(&a), Some(&b)) if hex2(a, b).is_some() => {
                        out.push(hex2(a, b).unwrap_or(0));
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn url_encode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    for &b in input {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'*') {
            out.push(b);
        } else if b == b' ' {
            out.push(b'+');
        } else {
            out.extend_from_slice(format!("%{b:02x}").as_bytes());
        }
    }
    out
}

fn html_entity_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] != b'&' {
            out.push(input[i]);
            i += 1;
            continue;
        }
        if let Some((byte, used)) = decode_entity(&input[i + 1..]) {
            out.push(byte);
            i += 1 + used;
        } else {
            out.push(b'&');
            i += 1;
        }
    }
    out
}

/// Decodes one entity after `&`; the `;` is optional, as browsers accept it without.
fn decode_entity(s: &[u8]) -> Option<(u8, usize)> {
    let semi = |n: usize| if s.get(n) == Some(&b';') { n + 1 } else { n };
    if s.first() == Some(&b'#') {
        let (radix, start) = if matches!(s.get(1), Some(b'x' | b'X')) {
            (16, 2)
        } else {
            (10, 1)
        };
        let digits = s[start..]
            .iter()
            .take_while(|b| (**b as char).is_digit(radix))
            .count();
        if digits == 0 {
            return None;
        }
        let text = std::str::from_utf8(&s[start..start + digits]).ok()?;
        let code = u32::from_str_radix(text, radix).unwrap_or(u32::MAX);
        return Some((unicode_to_byte(code), semi(start + digits)));
    }
    let name_len = s.iter().take_while(|b| b.is_ascii_alphanumeric()).count();
    let byte = match s[..name_len].to_ascii_lowercase().as_slice() {
        b"quot" => b'"',
        b"amp" => b'&',
        b"lt" => b'<',
        b"gt" => b'>',
        b"nbsp" => 0xa0,
        b"apos" => b'\'',
        _ => return None,
    };
    Some((byte, semi(name_len)))
}

fn js_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] != b'\\' || i + 1 >= input.len() {
            out.push(input[i]);
            i += 1;
            continue;
        }
        let next = input[i + 1];
        if next == b'u' {
            if let Some(code) = hex4(&input[i + 2..]) {
                out.push(unicode_to_byte(code));
                i += 6;
                continue;
            }
        }
        if next == b'x' {
            if let (Some(&a), Some(&b)) = (input.get(i + 2), input.get(i + 3)) {
                if let Some(v) = hex2(a, b) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        if (b'0'..=b'7').contains(&next) {
            let digits = input[i + 1..]
                .iter()
                .take(3)
                .take_while(|b| (b'0'..=b'7').contains(b));
            let mut n = digits.count();
            if n == 3 && input[i + 1] > b'3' {
                n = 2;
            }
            let v = input[i + 1..i + 1 + n]
                .iter()
                .fold(0u32, |a, &b| a * 8 + u32::from(b - b'0'));
            out.push(v as u8);
            i += 1 + n;
            continue;
        }
        out.push(simple_escape(next).unwrap_or(next));
        i += 2;
    }
    out
}

fn simple_escape(c: u8) -> Option<u8> {
    Some(match c {
        b'a' => 0x07,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'v' => 0x0b,
        _ => return None,
    })
}

fn css_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] != b'\\' {
            out.push(input[i]);
            i += 1;
            continue;
        }
        if i + 1 >= input.len() {
            // A lone trailing backslash is dropped.
            i += 1;
            continue;
        }
        let digits = input[i + 1..]
            .iter()
            .take(6)
            .take_while(|b| hex_val(**b).is_some())
            .count();
        if digits > 0 {
            let code = input[i + 1..i + 1 + digits]
                .iter()
                .fold(0u32, |a, &b| a << 4 | u32::from(hex_val(b).unwrap_or(0)));
            out.push(unicode_to_byte(code));
            i += 1 + digits;
            // One whitespace after a hex escape terminates it and is consumed.
            if input.get(i).is_some_and(|b| is_space(*b)) {
                i += 1;
            }
        } else if input[i + 1] == b'\n' {
            i += 2;
        } else {
            out.push(input[i + 1]);
            i += 2;
        }
    }
    out
}

fn utf8_to_unicode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    for chunk in input.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_ascii() {
                out.push(c as u8);
            } else {
                out.extend_from_slice(format!("%u{:04x}", c as u32).as_bytes());
            }
        }
        out.extend_from_slice(chunk.invalid());
    }
    out
}

fn compress_whitespace(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
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
    out
}

fn replace_comments(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
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
    out
}

fn remove_comments(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
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
    out
}

fn remove_comments_char(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
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
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Undoes shell obfuscation: drops `\ " ' ^`, turns `,` `;` and whitespace into one space,
/// removes spaces before `/` and `(`, and lowercases.
fn cmd_line(input: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(input.len());
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
    out
}

fn normalise_path(input: &[u8], windows: bool) -> Vec<u8> {
    if input.is_empty() {
        return Vec::new();
    }
    let src: Vec<u8> = if windows {
        input
            .iter()
            .map(|&b| if b == b'\\' { b'/' } else { b })
            .collect()
    } else {
        input.to_vec()
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
    let mut out = Vec::with_capacity(src.len());
    if absolute {
        out.push(b'/');
    }
    out.extend_from_slice(&segments.join(&b'/'));
    if trailing && !segments.is_empty() {
        out.push(b'/');
    }
    out
}

fn escape_seq_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] != b'\\' || i + 1 >= input.len() {
            out.push(input[i]);
            i += 1;
            continue;
        }
        let next = input[i + 1];
        if let Some(v) = simple_escape(next) {
            out.push(v);
            i += 2;
        } else if matches!(next, b'\\' | b'?' | b'\'' | b'"') {
            out.push(next);
            i += 2;
        } else if next == b'x' || next == b'X' {
            match (input.get(i + 2), input.get(i + 3)) {
                (Some(&a), Some(&b)) if hex2(a, b).is_some() => {
                    out.push(hex2(a, b).unwrap_or(0));
                    i += 4;
                }
                _ => {
                    out.extend_from_slice(&input[i..i + 2]);
                    i += 2;
                }
            }
        } else if (b'0'..=b'7').contains(&next) {
            let n = input[i + 1..]
                .iter()
                .take(3)
                .take_while(|b| (b'0'..=b'7').contains(b))
                .count();
            let v = input[i + 1..i + 1 + n]
                .iter()
                .fold(0u32, |a, &b| a * 8 + u32::from(b - b'0'));
            out.push(v as u8);
            i += 1 + n;
        } else {
            out.extend_from_slice(&input[i..i + 2]);
            i += 2;
        }
    }
    out
}

/// Decodes as far as the input is valid base64, like ModSecurity (which stops at the first
/// foreign byte); `ext` skips foreign bytes instead.
fn base64_decode(input: &[u8], ext: bool) -> Vec<u8> {
    let alphabet = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    let mut clean: Vec<u8> = if ext {
        input.iter().copied().filter(|&b| alphabet(b)).collect()
    } else {
        input.iter().copied().take_while(|&b| alphabet(b)).collect()
    };
    let rem = clean.len() % 4;
    if rem == 1 {
        clean.pop();
    }
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(&clean)
        .or_else(|_| {
            base64::engine::GeneralPurpose::new(
                &base64::alphabet::STANDARD,
                base64::engine::GeneralPurposeConfig::new()
                    .with_decode_allow_trailing_bits(true)
                    .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
            )
            .decode(&clean)
        })
        .unwrap_or_default()
}

fn hex_encode(input: &[u8]) -> Vec<u8> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    input
        .iter()
        .flat_map(|&b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .collect()
}

fn hex_decode(input: &[u8]) -> Vec<u8> {
    input
        .chunks_exact(2)
        .filter_map(|p| hex2(p[0], p[1]))
        .collect()
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
