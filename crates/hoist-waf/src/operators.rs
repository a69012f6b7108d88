//! Operators (`@rx`, `@pm`, ...), compiled at load: regexes once, phrase lists into
//! Aho-Corasick automata, byte ranges into tables.

pub use crate::captures::Captures;
use crate::macros::Macro;
use crate::phrase_set::PhraseSet;
use std::borrow::Cow;
use std::net::IpAddr;
use std::path::Path;

/// What an operator needs from the transaction: macro expansion.
pub trait Expand {
    /// The expansion as text, for messages and log data: bytes that are not UTF-8 are
    /// replaced.
    fn expand<'a>(&'a self, m: &'a Macro) -> Cow<'a, str>;

    /// The expansion as bytes, as ModSecurity expands macros (a TX value captured from
    /// binary input stays those bytes): what operators compare with.
    fn expand_bytes<'a>(&'a self, m: &'a Macro) -> Cow<'a, [u8]> {
        match self.expand(m) {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        }
    }
}

/// CRS regexes are written for PCRE. Most compile with the `regex` crate (linear time); the
/// few that use lookaround or backreferences fall back to `fancy-regex`.
#[derive(Debug)]
pub enum Pattern {
    Bytes(regex::bytes::Regex),
    Fancy(fancy_regex::Regex),
    /// `^.*$`, which in DOTALL mode matches every value as a whole: CRS 920450 captures each
    /// header name with it. Answered without a regex search (a search's setup cost more
    /// than the rest of the rule's work on a short name).
    Whole,
}

impl Pattern {
    /// PCRE as ModSecurity runs it: DOTALL, byte-oriented (no UTF mode) where possible.
    pub fn compile(pattern: &str) -> Result<Pattern, String> {
        if pattern == "^.*$" {
            return Ok(Pattern::Whole);
        }
        let pattern = &braced_hex_to_bytes(pattern);
        if let Ok(re) = regex::bytes::Regex::new(&format!("(?s-u){pattern}")) {
            return Ok(Pattern::Bytes(re));
        }
        if let Ok(re) = regex::bytes::Regex::new(&format!("(?s){pattern}")) {
            return Ok(Pattern::Bytes(re));
        }
        fancy_regex::Regex::new(&format!("(?s){pattern}"))
            .map(Pattern::Fancy)
            .map_err(|e| format!("regex does not compile: {e}"))
    }

    pub fn is_fancy(&self) -> bool {
        matches!(self, Pattern::Fancy(_))
    }

    /// Whether it matches; with `captures`, fills group 0..=9 as the `capture` action wants.
    pub fn find(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        match self {
            Pattern::Whole => {
                if let Some(out) = captures {
                    out.clear();
                    out.push(input);
                }
                true
            }
            Pattern::Bytes(re) => match captures {
                None => re.is_match(input),
                // No groups of its own (CRS's `^.*$` on every header name): TX.0 is the
                // match, which the DFA finds without the capturing engine.
                Some(out) if re.captures_len() == 1 => match re.find(input) {
                    None => false,
                    Some(m) => {
                        out.clear();
                        out.push(m.as_bytes());
                        true
                    }
                },
                // Captures need the slower capturing engine: only run it on a match, which
                // the lazy DFA decides first (most values do not match).
                Some(_) if !re.is_match(input) => false,
                Some(out) => match re.captures(input) {
                    None => false,
                    Some(c) => {
                        out.clear();
                        for i in 0..c.len().min(10) {
                            out.push(c.get(i).map_or(&[][..], |m| m.as_bytes()));
                        }
                        true
                    }
                },
            },
            Pattern::Fancy(re) => {
                let text = String::from_utf8_lossy(input);
                let text: &str = &text;
                match captures {
                    // A backtracking limit hit counts as no match rather than an error.
                    None => re.is_match(text).unwrap_or(false),
                    Some(out) => match re.captures(text) {
                        Ok(Some(c)) => {
                            out.clear();
                            for i in 0..c.len().min(10) {
                                out.push(c.get(i).map_or(&[][..], |m| m.as_str().as_bytes()));
                            }
                            true
                        }
                        _ => false,
                    },
                }
            }
        }
    }
}

/// PCRE without UTF mode reads `\x{e2}` as the byte 0xe2; the regex crate reads it as the
/// code point U+00E2 even with Unicode off. CRS spells UTF-8 sequences byte by byte that way,
/// so two-digit braced escapes become `\xe2`, which the regex crate does read as a byte.
fn braced_hex_to_bytes(pattern: &str) -> String {
    let b = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'x') && b.get(i + 2) == Some(&b'{') {
            let digits = b[i + 3..]
                .iter()
                .take_while(|c| c.is_ascii_hexdigit())
                .count();
            if (1..=2).contains(&digits) && b.get(i + 3 + digits) == Some(&b'}') {
                out.push_str(&pattern[copied..i]);
                out.push_str("\\x");
                if digits == 1 {
                    out.push('0');
                }
                out.push_str(&pattern[i + 3..i + 3 + digits]);
                i += 4 + digits;
                copied = i;
                continue;
            }
        }
        // Skip the escaped character, so `\\x{..}` (a literal backslash) is left alone.
        i += 2;
    }
    out.push_str(pattern.get(copied..).unwrap_or(""));
    out
}

#[derive(Debug)]
pub enum Operator {
    Rx(Pattern),
    Pm(PhraseSet),
    StrEq(Macro),
    Eq(Macro),
    Ge(Macro),
    Gt(Macro),
    Lt(Macro),
    Le(Macro),
    Within(Macro),
    Contains(Macro),
    ContainsWord(Macro),
    BeginsWith(Macro),
    EndsWith(Macro),
    IpMatch(Vec<(IpAddr, u8)>),
    ValidateByteRange(Box<[bool; 256]>),
    ValidateUrlEncoding,
    ValidateUtf8Encoding,
    DetectSqli,
    DetectXss,
    UnconditionalMatch,
    NoMatch,
}

impl Operator {
    /// `spec` is the operator argument as written (`@rx ...`, `!@eq 0`, or a bare regex);
    /// returns the operator and whether it is negated. `dir` anchors `@pmFromFile` paths.
    pub fn parse(spec: &str, dir: &Path) -> Result<(Operator, bool), String> {
        let (negated, rest) = match spec.strip_prefix('!') {
            Some(r) => (true, r),
            None => (false, spec),
        };
        let Some(rest) = rest.strip_prefix('@') else {
            return Ok((Operator::Rx(Pattern::compile(rest)?), negated));
        };
        let (name, arg) = match rest.split_once([' ', '\t']) {
            Some((n, a)) => (n, a.trim_start()),
            None => (rest, ""),
        };
        let m = || Macro::parse(arg);
        let op = match name.to_ascii_lowercase().as_str() {
            "rx" => Operator::Rx(Pattern::compile(arg)?),
            "pm" => phrases(arg.split_whitespace())?,
            "pmfromfile" | "pmf" => {
                let mut words = Vec::new();
                for file in arg.split_whitespace() {
                    let path = dir.join(file);
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| format!("@pmFromFile: cannot read {}: {e}", path.display()))?;
                    words.extend(
                        text.lines()
                            .map(str::trim)
                            .filter(|l| !l.is_empty() && !l.starts_with('#'))
                            .map(str::to_string),
                    );
                }
                phrases(words.iter().map(String::as_str))?
            }
            "streq" => Operator::StrEq(m()),
            "eq" => Operator::Eq(m()),
            "ge" => Operator::Ge(m()),
            "gt" => Operator::Gt(m()),
            "lt" => Operator::Lt(m()),
            "le" => Operator::Le(m()),
            "within" => Operator::Within(m()),
            "contains" => Operator::Contains(m()),
            "containsword" => Operator::ContainsWord(m()),
            "beginswith" => Operator::BeginsWith(m()),
            "endswith" => Operator::EndsWith(m()),
            "ipmatch" => Operator::IpMatch(parse_ips(arg)?),
            "validatebyterange" => Operator::ValidateByteRange(parse_byte_ranges(arg)?),
            "validateurlencoding" => Operator::ValidateUrlEncoding,
            "validateutf8encoding" => Operator::ValidateUtf8Encoding,
            "detectsqli" => Operator::DetectSqli,
            "detectxss" => Operator::DetectXss,
            "unconditionalmatch" => Operator::UnconditionalMatch,
            "nomatch" => Operator::NoMatch,
            other => return Err(format!("unsupported operator @{other}")),
        };
        Ok((op, negated))
    }

    pub fn name(&self) -> &'static str {
        match self {
            Operator::Rx(_) => "Rx",
            Operator::Pm(..) => "Pm",
            Operator::StrEq(_) => "StrEq",
            Operator::Eq(_) => "Eq",
            Operator::Ge(_) => "Ge",
            Operator::Gt(_) => "Gt",
            Operator::Lt(_) => "Lt",
            Operator::Le(_) => "Le",
            Operator::Within(_) => "Within",
            Operator::Contains(_) => "Contains",
            Operator::ContainsWord(_) => "ContainsWord",
            Operator::BeginsWith(_) => "BeginsWith",
            Operator::EndsWith(_) => "EndsWith",
            Operator::IpMatch(_) => "IpMatch",
            Operator::ValidateByteRange(_) => "ValidateByteRange",
            Operator::ValidateUrlEncoding => "ValidateUrlEncoding",
            Operator::ValidateUtf8Encoding => "ValidateUtf8Encoding",
            Operator::DetectSqli => "DetectSQLi",
            Operator::DetectXss => "DetectXSS",
            Operator::UnconditionalMatch => "UnconditionalMatch",
            Operator::NoMatch => "NoMatch",
        }
    }

    /// Evaluates without negation. `captures` receives TX.0.. when the rule has `capture`.
    pub fn evaluate(
        &self,
        input: &[u8],
        env: &dyn Expand,
        captures: Option<&mut Captures>,
    ) -> bool {
        let num = |m: &Macro| atoi(&env.expand_bytes(m));
        let capture0 = |captures: Option<&mut Captures>, v: &[u8]| {
            if let Some(c) = captures {
                c.clear();
                c.push(v);
            }
        };
        match self {
            Operator::Rx(p) => p.find(input, captures),
            Operator::Pm(phrases) => match phrases.find(input) {
                Some(m) => {
                    capture0(captures, input.get(m).unwrap_or_default());
                    true
                }
                None => false,
            },
            Operator::StrEq(m) => input == &env.expand_bytes(m)[..],
            Operator::Eq(m) => atoi(input) == num(m),
            Operator::Ge(m) => atoi(input) >= num(m),
            Operator::Gt(m) => atoi(input) > num(m),
            Operator::Lt(m) => atoi(input) < num(m),
            Operator::Le(m) => atoi(input) <= num(m),
            // ModSecurity: an empty value is within nothing (so `!@within` flags an empty
            // REQUEST_PROTOCOL, as CRS 920430 expects).
            Operator::Within(m) => !input.is_empty() && contains(&env.expand_bytes(m), input),
            Operator::Contains(m) => contains(input, &env.expand_bytes(m)),
            Operator::ContainsWord(m) => contains_word(input, &env.expand_bytes(m)),
            Operator::BeginsWith(m) => input.starts_with(&env.expand_bytes(m)),
            Operator::EndsWith(m) => input.ends_with(&env.expand_bytes(m)),
            Operator::IpMatch(nets) => std::str::from_utf8(input)
                .ok()
                .and_then(|s| s.trim().parse::<IpAddr>().ok())
                .is_some_and(|ip| nets.iter().any(|(net, bits)| in_net(ip, *net, *bits))),
            Operator::ValidateByteRange(allowed) => input.iter().any(|&b| !allowed[usize::from(b)]),
            Operator::ValidateUrlEncoding => !valid_url_encoding(input),
            Operator::ValidateUtf8Encoding => std::str::from_utf8(input).is_err(),
            Operator::DetectSqli => {
                crate::injection::detect_sqli(input, |fingerprint| capture0(captures, fingerprint))
            }
            Operator::DetectXss => crate::injection::detect_xss(input),
            Operator::UnconditionalMatch => true,
            Operator::NoMatch => false,
        }
    }
}

fn phrases<'a>(words: impl Iterator<Item = &'a str>) -> Result<Operator, String> {
    let words: Vec<Vec<u8>> = words.map(|w| w.as_bytes().to_vec()).collect();
    Ok(Operator::Pm(PhraseSet::new(words)?))
}

/// C `atoi`: optional sign and leading digits, anything else is 0; saturates instead of
/// overflowing on hostile input.
pub fn atoi(input: &[u8]) -> i64 {
    let s = input.trim_ascii();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for &b in digits.iter().take_while(|b| b.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// Haystacks up to this long are searched by candidates (`contains_short`): CRS's `@within`
/// lists (restricted headers, allowed methods and content types) are a few hundred bytes
/// searched once per header, and building memmem's searcher cost more than the search
/// (~650 instructions per call, 920450 calls it once per request header). Longer haystacks
/// get memmem, whose time is linear whatever the needle.
const SHORT_HAYSTACK: usize = 512;

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    if hay.len() <= SHORT_HAYSTACK {
        contains_short(hay, needle)
    } else {
        memchr::memmem::find(hay, needle).is_some()
    }
}

/// Each occurrence of the needle's second byte (its first is often a list's delimiter,
/// `/user-agent/`) is a candidate, compared whole. At most `SHORT_HAYSTACK` candidates of
/// at most that many bytes each.
fn contains_short(hay: &[u8], needle: &[u8]) -> bool {
    let Some(&key) = needle.get(1) else {
        return match needle.first() {
            None => true,
            Some(&b) => memchr::memchr(b, hay).is_some(),
        };
    };
    if needle.len() > hay.len() {
        return false;
    }
    let last_start = hay.len() - needle.len();
    memchr::memchr_iter(key, hay.get(1..).unwrap_or_default())
        .take_while(|&at| at <= last_start)
        .any(|at| hay.get(at..at + needle.len()) == Some(needle))
}

fn contains_word(hay: &[u8], word: &[u8]) -> bool {
    if word.is_empty() {
        return true;
    }
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    memchr::memmem::find_iter(hay, word).any(|i| {
        (i == 0 || !is_word(hay[i - 1])) && hay.get(i + word.len()).is_none_or(|&b| !is_word(b))
    })
}

fn valid_url_encoding(input: &[u8]) -> bool {
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%' {
            match (input.get(i + 1), input.get(i + 2)) {
                (Some(a), Some(b)) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => i += 3,
                _ => return false,
            }
        } else {
            i += 1;
        }
    }
    true
}

fn parse_ips(arg: &str) -> Result<Vec<(IpAddr, u8)>, String> {
    arg.split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (addr, bits) = s.split_once('/').unwrap_or((s, ""));
            let ip: IpAddr = addr
                .parse()
                .map_err(|_| format!("@ipMatch: bad address {s}"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let bits = if bits.is_empty() {
                max
            } else {
                bits.parse::<u8>()
                    .ok()
                    .filter(|b| *b <= max)
                    .ok_or(format!("@ipMatch: bad prefix {s}"))?
            };
            Ok((ip, bits))
        })
        .collect()
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let (a, b, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b)), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    if bits == 0 {
        return true;
    }
    let shift = width - u32::from(bits);
    (a >> shift) == (b >> shift)
}

fn parse_byte_ranges(arg: &str) -> Result<Box<[bool; 256]>, String> {
    let mut table = Box::new([false; 256]);
    for part in arg.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let parse = |s: &str| {
            s.trim()
                .parse::<u8>()
                .map_err(|_| format!("@validateByteRange: bad range {part}"))
        };
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        if lo > hi {
            return Err(format!("@validateByteRange: bad range {part}"));
        }
        for b in lo..=hi {
            table[usize::from(b)] = true;
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::{contains, SHORT_HAYSTACK};

    /// The candidate search agrees with a window-by-window compare, on haystacks both sides of
    /// the length where memmem takes over, needles at every offset and of every length.
    #[test]
    fn contains_agrees_with_a_naive_search() {
        let naive = |hay: &[u8], needle: &[u8]| {
            needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
        };
        let mut next = crate::test_rng::xorshift(0xC0FF_EE00_D15E_A5E5);
        for len in [
            0,
            1,
            2,
            3,
            17,
            SHORT_HAYSTACK - 1,
            SHORT_HAYSTACK,
            SHORT_HAYSTACK + 1,
        ] {
            for _ in 0..200 {
                let hay: Vec<u8> = (0..len).map(|_| b"ab/"[(next() % 3) as usize]).collect();
                let n = (next() % 6) as usize;
                let needle: Vec<u8> = match (next() % 2, hay.len()) {
                    (0, l) if l >= n => {
                        let at = (next() as usize) % (l - n + 1);
                        hay[at..at + n].to_vec()
                    }
                    _ => (0..n).map(|_| b"ab/"[(next() % 3) as usize]).collect(),
                };
                assert_eq!(
                    contains(&hay, &needle),
                    naive(&hay, &needle),
                    "{hay:?} {needle:?}"
                );
            }
        }
        assert!(contains(b"/proxy/ /user-agent/", b"/user-agent/"));
        assert!(!contains(b"/proxy/ /user-agent/", b"/user-agent/x"));
        assert!(contains(b"ab", b"ab") && !contains(b"a", b"ab") && contains(b"", b""));
    }
}
