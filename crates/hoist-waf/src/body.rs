//! Request body processors: urlencoded, multipart, JSON and XML, each turning the buffered
//! body into the variables rules inspect. Malformed bodies set REQBODY_ERROR, never panic.

use crate::decode::url_decode;
use crate::pair_list::PairList;

pub type Pairs = Vec<(String, Vec<u8>)>;
/// A borrowed list of pairs.
pub type PairSlice = [(String, Vec<u8>)];

/// Where the body processors put the arguments they find: a plain list, or the
/// transaction's lists, whose entries' buffers are kept from request to request.
pub(crate) trait PairSink {
    fn len(&self) -> usize;
    /// Appends an entry that `fill` writes into an empty name and value.
    fn push_raw(&mut self, fill: impl FnOnce(&mut String, &mut Vec<u8>));
}

impl PairSink for Pairs {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn push_raw(&mut self, fill: impl FnOnce(&mut String, &mut Vec<u8>)) {
        let (mut name, mut value) = (String::new(), Vec::new());
        fill(&mut name, &mut value);
        self.push((name, value));
    }
}

impl PairSink for PairList {
    fn len(&self) -> usize {
        PairList::len(self)
    }

    fn push_raw(&mut self, fill: impl FnOnce(&mut String, &mut Vec<u8>)) {
        PairList::push_raw(self, fill);
    }
}

/// `a=1&b=2`, names and values URL-decoded (`+` is a space) as ModSecurity does.
/// Appends `name=value` pairs to `out` while it holds fewer than `limit`; returns false when
/// arguments were left out (SecArgumentsLimit).
pub(crate) fn parse_urlencoded(body: &[u8], out: &mut impl PairSink, limit: usize) -> bool {
    // memchr finds the separators (a form POST's ~200 pairs were split and searched byte
    // by byte: ~1,000 instructions per pair before any decoding).
    let mut rest = body;
    while !rest.is_empty() {
        let end = memchr::memchr(b'&', rest).unwrap_or(rest.len());
        let (part, after) = rest.split_at(end);
        rest = after.get(1..).unwrap_or_default();
        if part.is_empty() {
            continue;
        }
        if out.len() >= limit {
            return false;
        }
        let (name, value) = match memchr::memchr(b'=', part) {
            Some(i) => (&part[..i], &part[i + 1..]),
            None => (part, &b""[..]),
        };
        out.push_raw(|n, v| {
            // A name with nothing to decode (the usual `field_name`) is copied as is.
            let plain = memchr::memchr2(b'%', b'+', name).is_none();
            match plain.then(|| std::str::from_utf8(name).ok()).flatten() {
                Some(text) => n.push_str(text),
                None => {
                    // The name is decoded into the value's buffer first.
                    url_decode(name, false, v);
                    n.push_str(&String::from_utf8_lossy(v));
                    v.clear();
                }
            }
            url_decode(value, false, v);
        });
    }
    true
}

/// `a=b; c=d`: cookie values are not URL-decoded.
pub(crate) fn parse_cookies(header: &[u8], out: &mut impl PairSink) {
    for part in header.split(|&b| b == b';') {
        let part = part.trim_ascii();
        if part.is_empty() {
            continue;
        }
        let (name, value) = match part.iter().position(|&b| b == b'=') {
            Some(i) => (&part[..i], &part[i + 1..]),
            None => (part, &b""[..]),
        };
        out.push_raw(|n, v| {
            n.push_str(&String::from_utf8_lossy(name.trim_ascii()));
            v.extend_from_slice(value);
        });
    }
}

#[derive(Debug, Default)]
pub struct Multipart {
    pub args: Pairs,
    /// FILES: field name → file name.
    pub files: Pairs,
    pub file_sizes: Vec<usize>,
    /// MULTIPART_PART_HEADERS: field name → each raw header line of the part.
    pub part_headers: Pairs,
    pub strict_error: bool,
    pub unmatched_boundary: bool,
    pub error: Option<String>,
}

pub fn boundary_of(content_type: &str) -> Option<String> {
    let lower = content_type.to_ascii_lowercase();
    let at = lower.find("boundary=")?;
    let raw = &content_type[at + 9..];
    let raw = raw.split(';').next().unwrap_or("").trim();
    let b = raw.trim_matches('"');
    (!b.is_empty()).then(|| b.to_string())
}

/// A `name="value"` parameter of a Content-Disposition; `;` inside quotes is part of the value.
fn header_param(value: &str, param: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i] != b'=' && bytes[i] != b';' {
            i += 1;
        }
        let key = value[start..i].trim();
        if i >= bytes.len() || bytes[i] == b';' {
            i += 1;
            continue;
        }
        i += 1;
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        let v = if bytes.get(i) == Some(&b'"') {
            let vstart = i + 1;
            i = vstart;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            let v = value
                .get(vstart..i.min(bytes.len()))
                .unwrap_or("")
                .replace("\\\"", "\"");
            i += 1;
            v
        } else {
            let vstart = i;
            while i < bytes.len() && bytes[i] != b';' {
                i += 1;
            }
            value[vstart..i].trim().to_string()
        };
        while i < bytes.len() && bytes[i] != b';' {
            i += 1;
        }
        i += 1;
        if key.eq_ignore_ascii_case(param) {
            return Some(v);
        }
    }
    None
}

/// `limit`: SecArgumentsLimit, for fields and files together; past it the body is an error.
pub fn parse_multipart(body: &[u8], boundary: &str, limit: usize) -> Multipart {
    let mut m = Multipart::default();
    let delim = format!("--{boundary}");
    let delim = delim.as_bytes();
    let Some(first) = find(body, delim) else {
        m.error = Some("multipart: no boundary found".into());
        m.strict_error = true;
        return m;
    };
    let mut rest = &body[first + delim.len()..];
    let mut finished = false;
    loop {
        if rest.starts_with(b"--") {
            finished = true;
            break;
        }
        let Some(next) = find(rest, delim) else { break };
        let part = &rest[..next];
        rest = &rest[next + delim.len()..];
        let part = part
            .strip_prefix(b"\r\n")
            .or_else(|| part.strip_prefix(b"\n"))
            .unwrap_or(part);
        let part = part
            .strip_suffix(b"\r\n")
            .or_else(|| part.strip_suffix(b"\n"))
            .unwrap_or(part);
        let (head, content) = match find(part, b"\r\n\r\n") {
            Some(i) => (&part[..i], &part[i + 4..]),
            None => match find(part, b"\n\n") {
                Some(i) => (&part[..i], &part[i + 2..]),
                None => {
                    m.strict_error = true;
                    continue;
                }
            },
        };
        let head = String::from_utf8_lossy(head);
        let lines: Vec<&str> = head.lines().map(|l| l.trim_end_matches('\r')).collect();
        let mut name = None;
        let mut filename = None;
        for line in &lines {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim().eq_ignore_ascii_case("content-disposition") {
                    name = header_param(v, "name");
                    filename = header_param(v, "filename");
                }
            }
        }
        let Some(name) = name else {
            m.strict_error = true;
            continue;
        };
        if m.args.len() + m.files.len() >= limit {
            m.error = Some(format!("multipart: more than {limit} arguments"));
            break;
        }
        for line in lines {
            m.part_headers
                .push((name.clone(), line.as_bytes().to_vec()));
        }
        match filename {
            Some(f) => {
                m.files.push((name, f.into_bytes()));
                m.file_sizes.push(content.len());
            }
            None => m.args.push((name, content.to_vec())),
        }
    }
    if !finished && m.error.is_none() {
        m.strict_error = true;
        m.error = Some("multipart: final boundary missing".into());
    }
    m
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// XML text nodes and attribute values: enough for `XML:/*` and `XML://@*` as CRS uses them.
#[derive(Debug, Default)]
pub struct Xml {
    pub texts: Vec<Vec<u8>>,
    pub attributes: Vec<Vec<u8>>,
}

pub fn parse_xml(body: &[u8]) -> Result<Xml, String> {
    let mut x = Xml::default();
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(body.len());
    if body.get(start) != Some(&b'<') {
        return Err("XML: document does not start with an element".into());
    }
    let mut i = start;
    let mut depth: i64 = 0;
    let mut seen_element = false;
    while i < body.len() {
        if body[i] == b'<' {
            let rest = &body[i..];
            let end_marker: &[u8] = if rest.starts_with(b"<!--") {
                b"-->"
            } else if rest.starts_with(b"<![CDATA[") {
                b"]]>"
            } else {
                b">"
            };
            let Some(end) = find(&rest[1..], end_marker) else {
                return Err("XML: unterminated markup".into());
            };
            let tag = &rest[1..1 + end];
            if rest.starts_with(b"<![CDATA[") {
                x.texts.push(rest[9..1 + end].to_vec());
            } else if tag.first() == Some(&b'/') {
                depth -= 1;
            } else if !matches!(tag.first(), Some(b'?' | b'!')) {
                seen_element = true;
                if tag.last() != Some(&b'/') {
                    depth += 1;
                }
                attributes(tag, &mut x.attributes);
            }
            i += 1 + end + end_marker.len();
        } else {
            let end = body[i..]
                .iter()
                .position(|&b| b == b'<')
                .map_or(body.len(), |p| i + p);
            let text = body[i..end].trim_ascii();
            if !text.is_empty() {
                x.texts.push(unescape(text));
            }
            i = end;
        }
    }
    if !seen_element || depth != 0 {
        return Err("XML: unbalanced elements".into());
    }
    Ok(x)
}

/// XML entity references (`&quot;`, `&#60;`) as a parser delivers them to XPath.
fn unescape(raw: &[u8]) -> Vec<u8> {
    if raw.contains(&b'&') {
        crate::transforms::Transform::HtmlEntityDecode.apply(raw)
    } else {
        raw.to_vec()
    }
}

fn attributes(tag: &[u8], out: &mut Vec<Vec<u8>>) {
    let mut i = 0;
    while i < tag.len() {
        if tag[i] == b'=' {
            let q = tag[i + 1..]
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .map(|p| i + 1 + p);
            if let Some(q) = q {
                let quote = tag[q];
                if quote == b'"' || quote == b'\'' {
                    if let Some(len) = tag[q + 1..].iter().position(|&b| b == quote) {
                        out.push(unescape(&tag[q + 1..q + 1 + len]));
                        i = q + 2 + len;
                        continue;
                    }
                }
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parser as it was before the separators were found with memchr: split on `&`,
    /// then the first `=`, name and value decoded the same way.
    fn parse_reference(body: &[u8]) -> Pairs {
        let mut out = Pairs::new();
        for part in body.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
            let (name, value) = match part.iter().position(|&b| b == b'=') {
                Some(i) => (&part[..i], &part[i + 1..]),
                None => (part, &b""[..]),
            };
            let (mut n, mut v) = (Vec::new(), Vec::new());
            url_decode(name, false, &mut n);
            url_decode(value, false, &mut v);
            out.push((String::from_utf8_lossy(&n).into_owned(), v));
        }
        out
    }

    fn parse(body: &[u8], limit: usize) -> (Pairs, bool) {
        let mut out = Pairs::new();
        let whole = parse_urlencoded(body, &mut out, limit);
        (out, whole)
    }

    #[test]
    fn urlencoded_pairs() {
        let (pairs, whole) = parse(b"a=1&&b=x+y%21&c&=v&d==e&%41%2b+=%zz&\xff=1&", 100);
        assert!(whole);
        let want: Vec<(&str, &[u8])> = vec![
            ("a", b"1"),
            ("b", b"x y!"),
            ("c", b""),
            ("", b"v"),
            ("d", b"=e"),
            ("A+ ", b"%zz"),
            ("\u{fffd}", b"1"),
        ];
        let got: Vec<(&str, &[u8])> = pairs.iter().map(|(n, v)| (n.as_str(), &v[..])).collect();
        assert_eq!(got, want);
        assert_eq!(parse(b"", 100).0, Pairs::new());
        assert_eq!(parse(b"&&&", 100).0, Pairs::new());
    }

    #[test]
    fn urlencoded_limit_leaves_the_rest_out() {
        let (pairs, whole) = parse(b"a=1&b=2&c=3", 2);
        assert!(!whole);
        assert_eq!(pairs.len(), 2);
        let (pairs, whole) = parse(b"a=1&b=2&&", 2);
        assert!(whole, "empty parts are not arguments");
        assert_eq!(pairs.len(), 2);
    }

    #[test]
    fn urlencoded_agrees_with_the_reference_parser() {
        let bytes = b"a=&%+2bF\xff\xc3\xa9 ";
        for body in crate::test_rng::inputs(0x2545_F491_4F6C_DD1D, bytes, 0..48, 300) {
            assert_eq!(
                parse(&body, usize::MAX).0,
                parse_reference(&body),
                "{body:?}"
            );
        }
    }
}
