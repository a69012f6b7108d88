//! The decoders behind the decoding transformations (URL, HTML entities, JavaScript, CSS, C
//! escapes, base64, hex). Malformed escapes are left as they are, as ModSecurity does: an
//! attacker must not be able to hide a payload behind a decoding error.

use crate::transforms::is_space;

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

/// Appends `input` URL-decoded to `out` (`+` is a space; with `uni`, `%uHHHH` too).
/// Malformed escapes stay as they are.
pub fn url_decode(input: &[u8], uni: bool, out: &mut Vec<u8>) {
    // Every escape reads at least the one byte it writes, so the output fits in the input's
    // length: written in place rather than pushed byte by byte (a push checks the capacity
    // each time; this ran on every form value and on the base64-decoded bytes of CRS's
    // Node.js rules, ~50 instructions a byte).
    let start = out.len();
    out.resize(start + input.len(), 0);
    let written = decode_into(input, uni, out.get_mut(start..).unwrap_or_default());
    out.truncate(start + written);
}

fn decode_into(input: &[u8], uni: bool, buf: &mut [u8]) -> usize {
    let mut j = 0;
    let mut rest = input;
    loop {
        // The run before the next `%` is copied with `+` made a space: a loop the compiler
        // vectorizes (byte by byte, url_decode was ~398k instructions per 10 KB form POST).
        let run = memchr::memchr(b'%', rest).unwrap_or(rest.len());
        let (head, tail) = rest.split_at(run);
        let Some(out) = buf.get_mut(j..j + head.len()) else {
            break;
        };
        for (o, &b) in out.iter_mut().zip(head) {
            *o = if b == b'+' { b' ' } else { b };
        }
        j += head.len();
        let Some((_, after)) = tail.split_first() else {
            break;
        };
        let (byte, used) = percent_escape(after, uni);
        if let Some(slot) = buf.get_mut(j) {
            *slot = byte;
        }
        j += 1;
        rest = tail.get(used..).unwrap_or_default();
    }
    j
}

/// The byte a `%` escape stands for and how many input bytes it takes (the `%` included);
/// `after` is what follows the `%`.
fn percent_escape(after: &[u8], uni: bool) -> (u8, usize) {
    if uni && matches!(after.first(), Some(b'u' | b'U')) {
        if let Some(code) = hex4(after.get(1..).unwrap_or_default()) {
            return (unicode_to_byte(code), 6);
        }
    }
    match after {
        [a, b, ..] => match hex2(*a, *b) {
            Some(byte) => (byte, 3),
            None => (b'%', 1),
        },
        _ => (b'%', 1),
    }
}

pub(crate) fn url_encode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    for &b in input {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'*') {
            out.push(b);
        } else if b == b' ' {
            out.push(b'+');
        } else {
            out.extend_from_slice(format!("%{b:02x}").as_bytes());
        }
    }
}

pub(crate) fn html_entity_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
    // The runs between `&`s are copied whole: byte by byte this was ~187k instructions per
    // 10 KB form POST.
    let mut rest = input;
    while let Some(at) = memchr::memchr(b'&', rest) {
        let (head, tail) = rest.split_at(at);
        out.extend_from_slice(head);
        let after = tail.get(1..).unwrap_or_default();
        match decode_entity(after) {
            Some((byte, used)) => {
                out.push(byte);
                rest = after.get(used..).unwrap_or_default();
            }
            None => {
                out.push(b'&');
                rest = after;
            }
        }
    }
    out.extend_from_slice(rest);
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

pub(crate) fn js_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
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

pub(crate) fn css_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
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
}

pub(crate) fn utf8_to_unicode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
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
}

pub(crate) fn escape_seq_decode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len());
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
}

/// Decodes as far as the input is valid base64, like ModSecurity (which stops at the first
/// foreign byte); `ext` skips foreign bytes instead.
pub(crate) fn base64_decode(input: &[u8], ext: bool, out: &mut Vec<u8>) {
    if ext {
        let alphabet = |b: u8| SEXTETS[usize::from(b)] != FOREIGN;
        let mut clean = Vec::new();
        crate::transforms::filtered(input, alphabet, &mut clean);
        let whole = clean.len() - clean.len() % 4;
        decode_sextets(&clean[..whole], out);
        decode_tail(clean.get(whole..).unwrap_or_default(), out);
    } else {
        decode_valid_prefix(input, out);
    }
}

/// Decodes the alphabet bytes of `input` before the first foreign one: whole groups of
/// four checked as they are decoded (a separate pass to find the first foreign byte cost
/// ~4 instructions a byte on every argument 934100 decodes), then the group the foreign
/// byte (or the end) cut short.
fn decode_valid_prefix(input: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    // Room for every whole group; the groups after a foreign byte are not written and
    // `truncate` gives their room back.
    out.resize(start + input.len() / 4 * 3, 0);
    let mut written = 0;
    let mut cut = None;
    if let Some(dst) = out.get_mut(start..) {
        for (g, d) in input.chunks_exact(4).zip(dst.chunks_exact_mut(3)) {
            let Ok(quad) = <[u8; 4]>::try_from(g) else {
                break;
            };
            let s = quad.map(|b| SEXTETS[usize::from(b)]);
            // FOREIGN has the top bits set, no sextet has.
            if (s[0] | s[1] | s[2] | s[3]) & 0xc0 != 0 {
                cut = Some(written / 3 * 4);
                break;
            }
            let n = s.iter().fold(0u32, |n, &x| (n << 6) | u32::from(x));
            d.copy_from_slice(&n.to_be_bytes()[1..]);
            written += 3;
        }
    }
    out.truncate(start + written);
    // The last group: cut by a foreign byte, or the input's remainder.
    let from = cut.unwrap_or(input.len() - input.len() % 4);
    let rest = input.get(from..).unwrap_or_default();
    let valid = rest
        .iter()
        .take(4)
        .take_while(|&&b| SEXTETS[usize::from(b)] != FOREIGN);
    decode_tail(rest.get(..valid.count()).unwrap_or_default(), out);
}

/// Appends what a last group of fewer than four alphabet bytes decodes to: one byte for
/// two, two for three, nothing for one (its bits make no byte), the leftover bits dropped
/// as ModSecurity does.
fn decode_tail(group: &[u8], out: &mut Vec<u8>) {
    match group {
        [a, b] => out.push(((sextet(a) << 2) | (sextet(b) >> 4)) as u8),
        [a, b, c] => {
            let n = (sextet(a) << 18) | (sextet(b) << 12) | (sextet(c) << 6);
            out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8]);
        }
        _ => {}
    }
}

/// How many bytes `base64_decode(input, false, ..)` writes, without decoding: three per
/// whole group of the alphabet bytes before the first foreign one, one or two for a last
/// group of two or three.
#[cfg(test)]
pub(crate) fn base64_decoded_len(input: &[u8]) -> usize {
    let valid = input
        .iter()
        .position(|&b| SEXTETS[usize::from(b)] == FOREIGN)
        .unwrap_or(input.len());
    valid / 4 * 3 + [0, 0, 1, 2][valid % 4]
}

/// How many alphabet bytes `base64_decode` needs to write `bytes` bytes: four per three, and
/// two for one more or three for two more (see `length_bound`).
pub(crate) const fn base64_chars_for(bytes: usize) -> usize {
    bytes / 3 * 4 + [0, 2, 3][bytes % 3]
}

/// Whether `input` starts with `chars` bytes of the alphabet, that is whether
/// `base64_decode(input, false, ..)` writes at least as many bytes as `chars` stand for.
/// Only those bytes are read, without a branch per byte: a rule whose matches are short
/// asks this of every value.
pub(crate) fn starts_with_base64_run(input: &[u8], chars: usize) -> bool {
    // FOREIGN has the top bits set, no sextet has: one test for the whole run.
    input.get(..chars).is_some_and(|head| {
        head.iter()
            .fold(0, |seen, &b| seen | SEXTETS[usize::from(b)])
            & 0xc0
            == 0
    })
}

/// The six bits of an alphabet byte (of a foreign byte: garbage, never asked for).
fn sextet(b: &u8) -> u32 {
    u32::from(SEXTETS[usize::from(*b)] & 63)
}

/// What `SEXTETS` holds for a byte outside the alphabet.
const FOREIGN: u8 = 0xff;

/// Each base64 alphabet byte's six bits (`+` and `/` as in the standard alphabet), `FOREIGN`
/// for the others: one table answers both questions.
const SEXTETS: [u8; 256] = {
    let mut table = [FOREIGN; 256];
    let mut i = 0;
    while i < 64 {
        let b = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[i];
        table[b as usize] = i as u8;
        i += 1;
    }
    table
};

/// Decodes `clean` (alphabet bytes only, a multiple of four long) to three bytes per group
/// of four. By hand rather than through the base64 crate, which rejected most values'
/// trailing bits and was called a second time in a lenient mode. The output is sized once
/// and written in place (pushing each group's three bytes cost more than decoding them).
fn decode_sextets(clean: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + clean.len() / 4 * 3, 0);
    let Some(dst) = out.get_mut(start..) else {
        return;
    };
    for (g, d) in clean.chunks_exact(4).zip(dst.chunks_exact_mut(3)) {
        let n = g.iter().fold(0, |n, b| (n << 6) | sextet(b));
        d.copy_from_slice(&n.to_be_bytes()[1..]);
    }
}

pub(crate) fn hex_decode(input: &[u8], out: &mut Vec<u8>) {
    out.extend(input.chunks_exact(2).filter_map(|p| hex2(p[0], p[1])));
}

#[cfg(test)]
mod tests {
    use super::{
        base64_chars_for, base64_decode, base64_decoded_len, starts_with_base64_run, url_decode,
    };
    use base64::engine::{general_purpose::GeneralPurpose, DecodePaddingMode};
    use base64::Engine;

    /// What the base64 crate decodes from the same alphabet bytes, accepting trailing bits
    /// as ModSecurity does (what `base64_decode` called before it decoded by hand).
    fn reference(input: &[u8], ext: bool) -> Vec<u8> {
        let alphabet = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
        let mut clean: Vec<u8> = if ext {
            input.iter().copied().filter(alphabet).collect()
        } else {
            input.iter().copied().take_while(alphabet).collect()
        };
        if clean.len() % 4 == 1 {
            clean.pop();
        }
        let engine = GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_allow_trailing_bits(true)
                .with_decode_padding_mode(DecodePaddingMode::Indifferent),
        );
        engine.decode(&clean).unwrap_or_default()
    }

    #[test]
    fn base64_agrees_with_a_lenient_reference_at_every_length() {
        let mut next = crate::test_rng::xorshift(0x2545_F491_4F6C_DD1D);
        let bytes = b"ABCXYZabcxyz0189+/=.* \x00\xff";
        for len in 0..48 {
            for _ in 0..200 {
                let input: Vec<u8> = (0..len)
                    .map(|_| match next() % 8 {
                        // Mostly alphabet bytes, so that most values decode far.
                        0 => bytes[(next() % bytes.len() as u64) as usize],
                        _ => {
                            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                                [(next() % 64) as usize]
                        }
                    })
                    .collect();
                for ext in [false, true] {
                    let out = appended(|out| base64_decode(&input, ext, out));
                    assert_eq!(out, reference(&input, ext), "{input:?} ext {ext}");
                    if !ext {
                        let len = out.len();
                        assert_eq!(base64_decoded_len(&input), len, "{input:?}");
                        for min in 0..40 {
                            let at_least = starts_with_base64_run(&input, base64_chars_for(min));
                            assert_eq!(at_least, len >= min, "{input:?} {min}");
                        }
                    }
                }
            }
        }
    }

    /// What `decode` appends to a buffer that already holds bytes; fails when it touched
    /// those (the decoders append to their caller's buffer, never clear it).
    fn appended(decode: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = b"kept".to_vec();
        decode(&mut out);
        assert!(
            out.starts_with(b"kept"),
            "the buffer's bytes were changed: {out:?}"
        );
        out.split_off(4)
    }

    /// The decoder byte by byte, as it was before runs were copied whole.
    fn url_decode_reference(input: &[u8], uni: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(&b) = input.get(i) {
            let (byte, used) = match b {
                b'+' => (b' ', 1),
                b'%' => super::percent_escape(input.get(i + 1..).unwrap_or_default(), uni),
                b => (b, 1),
            };
            out.push(byte);
            i += used;
        }
        out
    }

    #[test]
    fn url_decode_agrees_with_byte_by_byte_decoding() {
        let bytes = b"%%%++uU0aF4g9 x\xff";
        for input in crate::test_rng::inputs(0x9E37_79B9_7F4A_7C15, bytes, 0..40, 300) {
            for uni in [false, true] {
                let out = appended(|out| url_decode(&input, uni, out));
                assert_eq!(
                    out,
                    url_decode_reference(&input, uni),
                    "{input:?} uni {uni}"
                );
            }
        }
    }

    /// The decoder byte by byte, as it was before runs were copied whole.
    fn html_entity_decode_reference(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(&b) = input.get(i) {
            if b != b'&' {
                out.push(b);
                i += 1;
                continue;
            }
            match super::decode_entity(input.get(i + 1..).unwrap_or_default()) {
                Some((byte, used)) => {
                    out.push(byte);
                    i += 1 + used;
                }
                None => {
                    out.push(b'&');
                    i += 1;
                }
            }
        }
        out
    }

    #[test]
    fn html_entity_decode_agrees_with_byte_by_byte_decoding() {
        let mut next = crate::test_rng::xorshift(0x2545_F491_4F6C_DD1D);
        let pieces: &[&[u8]] = &[
            b"&", b"&&", b"#", b"x", b"3c", b"60", b";", b"lt", b"amp", b"quot", b"nbsp", b"a",
            b" ", b"&#", b"&#x",
        ];
        for _ in 0..20_000 {
            let mut input = Vec::new();
            for _ in 0..(next() % 8) {
                input.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
            }
            let out = appended(|out| super::html_entity_decode(&input, out));
            assert_eq!(
                out,
                html_entity_decode_reference(&input),
                "{:?}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}
