//! Rule targets: `ARGS|!ARGS:foo|&TX:x|REQUEST_HEADERS:/^x-/|XML:/*`, parsed once at load.

use regex::Regex;

/// The variables (scalars and collections) a rule can inspect, named as in SecLang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VarName {
    Args,
    ArgsGet,
    ArgsPost,
    ArgsNames,
    ArgsGetNames,
    ArgsPostNames,
    ArgsCombinedSize,
    RequestCookies,
    RequestCookiesNames,
    RequestHeaders,
    RequestHeadersNames,
    RequestUri,
    RequestUriRaw,
    RequestFilename,
    RequestBasename,
    RequestLine,
    RequestMethod,
    RequestProtocol,
    QueryString,
    RequestBody,
    RequestBodyLength,
    ReqbodyProcessor,
    ReqbodyError,
    ReqbodyErrorMsg,
    Files,
    FilesNames,
    FilesSizes,
    FilesCombinedSize,
    MultipartPartHeaders,
    MultipartStrictError,
    MultipartUnmatchedBoundary,
    MultipartFilename,
    MultipartName,
    Xml,
    Tx,
    MatchedVar,
    MatchedVars,
    MatchedVarName,
    MatchedVarsNames,
    RemoteAddr,
    UniqueId,
    ResponseHeaders,
    ResponseHeadersNames,
    ResponseBody,
    ResponseStatus,
    ResponseProtocol,
    ResponseContentType,
    Rule,
}

impl VarName {
    pub fn parse(name: &str) -> Option<VarName> {
        use VarName::*;
        Some(match name.to_ascii_uppercase().as_str() {
            "ARGS" => Args,
            "ARGS_GET" => ArgsGet,
            "ARGS_POST" => ArgsPost,
            "ARGS_NAMES" => ArgsNames,
            "ARGS_GET_NAMES" => ArgsGetNames,
            "ARGS_POST_NAMES" => ArgsPostNames,
            "ARGS_COMBINED_SIZE" => ArgsCombinedSize,
            "REQUEST_COOKIES" => RequestCookies,
            "REQUEST_COOKIES_NAMES" => RequestCookiesNames,
            "REQUEST_HEADERS" => RequestHeaders,
            "REQUEST_HEADERS_NAMES" => RequestHeadersNames,
            "REQUEST_URI" => RequestUri,
            "REQUEST_URI_RAW" => RequestUriRaw,
            "REQUEST_FILENAME" => RequestFilename,
            "REQUEST_BASENAME" => RequestBasename,
            "REQUEST_LINE" => RequestLine,
            "REQUEST_METHOD" => RequestMethod,
            "REQUEST_PROTOCOL" => RequestProtocol,
            "QUERY_STRING" => QueryString,
            "REQUEST_BODY" => RequestBody,
            "REQUEST_BODY_LENGTH" => RequestBodyLength,
            "REQBODY_PROCESSOR" => ReqbodyProcessor,
            "REQBODY_ERROR" => ReqbodyError,
            "REQBODY_ERROR_MSG" => ReqbodyErrorMsg,
            "FILES" => Files,
            "FILES_NAMES" => FilesNames,
            "FILES_SIZES" => FilesSizes,
            "FILES_COMBINED_SIZE" => FilesCombinedSize,
            "MULTIPART_PART_HEADERS" => MultipartPartHeaders,
            "MULTIPART_STRICT_ERROR" => MultipartStrictError,
            "MULTIPART_UNMATCHED_BOUNDARY" => MultipartUnmatchedBoundary,
            "MULTIPART_FILENAME" => MultipartFilename,
            "MULTIPART_NAME" => MultipartName,
            "XML" => Xml,
            "TX" => Tx,
            "MATCHED_VAR" => MatchedVar,
            "MATCHED_VARS" => MatchedVars,
            "MATCHED_VAR_NAME" => MatchedVarName,
            "MATCHED_VARS_NAMES" => MatchedVarsNames,
            "REMOTE_ADDR" => RemoteAddr,
            "UNIQUE_ID" => UniqueId,
            "RESPONSE_HEADERS" => ResponseHeaders,
            "RESPONSE_HEADERS_NAMES" => ResponseHeadersNames,
            "RESPONSE_BODY" => ResponseBody,
            "RESPONSE_STATUS" => ResponseStatus,
            "RESPONSE_PROTOCOL" => ResponseProtocol,
            "RESPONSE_CONTENT_TYPE" => ResponseContentType,
            "RULE" => Rule,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        use VarName::*;
        match self {
            Args => "ARGS",
            ArgsGet => "ARGS_GET",
            ArgsPost => "ARGS_POST",
            ArgsNames => "ARGS_NAMES",
            ArgsGetNames => "ARGS_GET_NAMES",
            ArgsPostNames => "ARGS_POST_NAMES",
            ArgsCombinedSize => "ARGS_COMBINED_SIZE",
            RequestCookies => "REQUEST_COOKIES",
            RequestCookiesNames => "REQUEST_COOKIES_NAMES",
            RequestHeaders => "REQUEST_HEADERS",
            RequestHeadersNames => "REQUEST_HEADERS_NAMES",
            RequestUri => "REQUEST_URI",
            RequestUriRaw => "REQUEST_URI_RAW",
            RequestFilename => "REQUEST_FILENAME",
            RequestBasename => "REQUEST_BASENAME",
            RequestLine => "REQUEST_LINE",
            RequestMethod => "REQUEST_METHOD",
            RequestProtocol => "REQUEST_PROTOCOL",
            QueryString => "QUERY_STRING",
            RequestBody => "REQUEST_BODY",
            RequestBodyLength => "REQUEST_BODY_LENGTH",
            ReqbodyProcessor => "REQBODY_PROCESSOR",
            ReqbodyError => "REQBODY_ERROR",
            ReqbodyErrorMsg => "REQBODY_ERROR_MSG",
            Files => "FILES",
            FilesNames => "FILES_NAMES",
            FilesSizes => "FILES_SIZES",
            FilesCombinedSize => "FILES_COMBINED_SIZE",
            MultipartPartHeaders => "MULTIPART_PART_HEADERS",
            MultipartStrictError => "MULTIPART_STRICT_ERROR",
            MultipartUnmatchedBoundary => "MULTIPART_UNMATCHED_BOUNDARY",
            MultipartFilename => "MULTIPART_FILENAME",
            MultipartName => "MULTIPART_NAME",
            Xml => "XML",
            Tx => "TX",
            MatchedVar => "MATCHED_VAR",
            MatchedVars => "MATCHED_VARS",
            MatchedVarName => "MATCHED_VAR_NAME",
            MatchedVarsNames => "MATCHED_VARS_NAMES",
            RemoteAddr => "REMOTE_ADDR",
            UniqueId => "UNIQUE_ID",
            ResponseHeaders => "RESPONSE_HEADERS",
            ResponseHeadersNames => "RESPONSE_HEADERS_NAMES",
            ResponseBody => "RESPONSE_BODY",
            ResponseStatus => "RESPONSE_STATUS",
            ResponseProtocol => "RESPONSE_PROTOCOL",
            ResponseContentType => "RESPONSE_CONTENT_TYPE",
            Rule => "RULE",
        }
    }
}

/// Which members of a collection a target names.
#[derive(Debug, Clone)]
pub enum Selector {
    All,
    /// Compared case-insensitively, as ModSecurity does for every collection key.
    Key(String),
    /// A regex (compiled case-insensitive) and the word every matching key holds (see
    /// `Word`): `/^pbjs-\w+$/`, which a dozen CRS rules use to exclude cookies, is tried
    /// only on keys that start with `pbjs-`.
    Regex(Regex, Word),
    /// A regex selector that is only an anchored word (`/^header_name_920450_/`): a prefix
    /// compared case-insensitively, stored folded. CRS scans every TX variable with these.
    Prefix(String),
}

/// The word every key a regex selector matches holds, folded: at its start when the pattern
/// is anchored, anywhere when not. Empty when the pattern does not begin with one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    pub folded: String,
    pub at_start: bool,
}

impl Word {
    /// Whether ASCII `key` holds the word (ASCII case folding, which for ASCII keys is
    /// exactly the regex's Unicode folding).
    fn in_ascii(&self, key: &str) -> bool {
        let (key, word) = (key.as_bytes(), self.folded.as_bytes());
        if self.at_start {
            return key
                .get(..word.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(word));
        }
        word.is_empty()
            || key
                .windows(word.len())
                .any(|w| w.eq_ignore_ascii_case(word))
    }
}

/// A regex selector's answer for `key`, the regex run only when `key` can hold `word`.
/// Out of line: `Selector::matches` runs for every member of every collection a rule reads;
/// CRS's `TX:/MULTIPART_HEADERS_CONTENT_TYPES_*/` (922110) ran its regex on every TX
/// variable of every request, ~7,000 instructions of a small GET.
#[inline(never)]
fn regex_matches(r: &Regex, word: &Word, key: &str) -> bool {
    // A match spans at least the word's length in bytes: a letter's other case forms
    // outside ASCII (U+017F for `s`, U+212A for `k`) are longer, never shorter. Most TX
    // names are shorter than 922110's word.
    if key.len() < word.folded.len() {
        return false;
    }
    // Keys outside ASCII go to the regex (Unicode folding: U+017F is `s`).
    let cannot = !word.folded.is_empty() && key.is_ascii() && !word.in_ascii(key);
    !cannot && r.is_match(key)
}

impl Selector {
    /// Whether both select the same members: the same kind and the same text (a regex's
    /// pattern as written).
    pub fn same_as(&self, other: &Selector) -> bool {
        match (self, other) {
            (Selector::All, Selector::All) => true,
            (Selector::Key(a), Selector::Key(b)) | (Selector::Prefix(a), Selector::Prefix(b)) => {
                a == b
            }
            (Selector::Regex(a, _), Selector::Regex(b, _)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }

    /// `matches` for a key stored ASCII-lowercased, as TX's are: a word or prefix (stored
    /// folded too) is compared byte for byte. CRS walks every TX name with
    /// `/^header_name_920450_/` once per request.
    #[inline]
    pub fn matches_folded(&self, key: &str) -> bool {
        match self {
            Selector::Key(k) => k == key,
            Selector::Prefix(p) => key.starts_with(p.as_str()),
            other => other.matches(key),
        }
    }

    #[inline]
    pub fn matches(&self, key: &str) -> bool {
        match self {
            Selector::All => true,
            Selector::Key(k) => k.eq_ignore_ascii_case(key),
            Selector::Regex(r, word) => regex_matches(r, word, key),
            Selector::Prefix(p) => key
                .as_bytes()
                .get(..p.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(p.as_bytes())),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Target {
    pub var: VarName,
    pub selector: Selector,
    /// `&VAR`: the number of members, not their values.
    pub count: bool,
}

/// `!VAR:sel`: members removed from the rule's other targets.
#[derive(Debug, Clone)]
pub struct Exclusion {
    pub var: VarName,
    pub selector: Selector,
}

impl Exclusion {
    pub fn excludes(&self, var: VarName, key: &str) -> bool {
        self.var == var && self.selector.matches(key)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Targets {
    pub targets: Vec<Target>,
    pub exclusions: Vec<Exclusion>,
}

/// Splits at `|` outside `/regex/` selectors and quotes.
fn split_targets(spec: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let bytes = spec.as_bytes();
    let (mut start, mut in_regex, mut in_quote) = (0, false, false);
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\\' && in_regex {
            i += 2;
            continue;
        }
        if c == b'\'' && !in_regex {
            in_quote = !in_quote;
        } else if c == b'/' && !in_quote {
            // A regex selector starts right after `:` and ends at the next unescaped `/`.
            if in_regex {
                in_regex = false;
            } else if i > 0 && bytes[i - 1] == b':' && !spec[..i].ends_with("XML:") {
                in_regex = true;
            }
        } else if c == b'|' && !in_regex && !in_quote {
            parts.push(&spec[start..i]);
            start = i + 1;
        }
        i += 1;
    }
    parts.push(&spec[start..]);
    parts
}

impl Targets {
    pub fn parse(spec: &str) -> Result<Targets, String> {
        let mut out = Targets::default();
        out.add(spec)?;
        Ok(out)
    }

    /// Adds targets and exclusions (SecRuleUpdateTargetById uses the same syntax).
    pub fn add(&mut self, spec: &str) -> Result<(), String> {
        for part in split_targets(spec) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (exclude, rest) = match part.strip_prefix('!') {
                Some(r) => (true, r),
                None => (false, part),
            };
            let (count, rest) = match rest.strip_prefix('&') {
                Some(r) => (true, r),
                None => (false, rest),
            };
            let (name, sel) = match rest.split_once(':') {
                Some((n, s)) => (n, Some(s)),
                None => (rest, None),
            };
            let var = VarName::parse(name).ok_or_else(|| format!("unknown variable {name}"))?;
            let selector = match sel {
                None => Selector::All,
                Some(s) => parse_selector(var, s)?,
            };
            if exclude {
                self.exclusions.push(Exclusion { var, selector });
            } else {
                self.targets.push(Target {
                    var,
                    selector,
                    count,
                });
            }
        }
        Ok(())
    }
}

/// The word every match of a regex selector holds (`^pbjs-\w+$` -> `pbjs-` at the start,
/// `MULTIPART_HEADERS_CONTENT_TYPES_*` -> `multipart_headers_content_types` anywhere),
/// folded; empty when the pattern has an alternation (`^a|b` need not start with `a`) or does
/// not begin with a plain character. A quantifier after the word makes its last character
/// optional (`^_ga?`).
fn required_word(pattern: &str) -> Word {
    let (rest, at_start) = match pattern.strip_prefix('^') {
        Some(rest) => (rest, true),
        None => (pattern, false),
    };
    if pattern.contains('|') {
        return Word::default();
    }
    let plain = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-';
    let run = rest.as_bytes().iter().take_while(|b| plain(b)).count();
    let mut word = rest.get(..run).unwrap_or("");
    if matches!(rest.as_bytes().get(run), Some(b'?' | b'*' | b'{')) {
        word = word.get(..run.saturating_sub(1)).unwrap_or("");
    }
    Word {
        folded: word.to_ascii_lowercase(),
        at_start,
    }
}

fn parse_selector(var: VarName, s: &str) -> Result<Selector, String> {
    let s = s.trim_matches('\'');
    if var == VarName::Xml {
        // XPath expressions are kept as keys; the XML extractor understands `/*` and `//@*`.
        return Ok(Selector::Key(s.to_string()));
    }
    if s.len() >= 2 && s.starts_with('/') && s.ends_with('/') {
        let pattern = &s[1..s.len() - 1];
        if let Some(word) = pattern.strip_prefix('^') {
            let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
            if !word.is_empty() && word.bytes().all(plain) {
                return Ok(Selector::Prefix(word.to_ascii_lowercase()));
            }
        }
        let re = Regex::new(&format!("(?i){pattern}"))
            .map_err(|e| format!("bad regex selector /{pattern}/: {e}"))?;
        return Ok(Selector::Regex(re, required_word(pattern)));
    }
    if var == VarName::Tx {
        // TX keys are stored folded; folding the selector once here saves it per lookup.
        return Ok(Selector::Key(s.to_ascii_lowercase()));
    }
    Ok(Selector::Key(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mixed_targets() {
        let t = Targets::parse("ARGS|!ARGS:foo|&TX:x|REQUEST_HEADERS:/^(a|b)$/|XML:/*")
            .expect("parses");
        assert_eq!(t.targets.len(), 4);
        assert_eq!(t.exclusions.len(), 1);
        assert!(t.targets[1].count);
        assert!(t.targets[2].selector.matches("A"));
        assert!(!t.targets[2].selector.matches("ab"));
        assert!(matches!(&t.targets[3].selector, Selector::Key(k) if k == "/*"));
    }

    #[test]
    fn anchored_word_selector_is_a_case_insensitive_prefix() {
        let t = Targets::parse("TX:/^Header_Name_/|ARGS:/^a.b/").expect("parses");
        let prefix = &t.targets[0].selector;
        assert!(matches!(prefix, Selector::Prefix(p) if p == "header_name_"));
        assert!(prefix.matches("header_name_920450_x-foo"));
        assert!(prefix.matches("HEADER_NAME_"));
        assert!(!prefix.matches("header_nam"));
        assert!(!prefix.matches("x_header_name_"));
        // Anything beyond a plain word stays a regex.
        assert!(matches!(&t.targets[1].selector, Selector::Regex(..)));
        assert!(t.targets[1].selector.matches("AxB"));
    }

    /// A regex selector is tried only on keys that hold its word (at the start when it is
    /// anchored); the answer is the regex's either way.
    #[test]
    fn regex_selector_skips_keys_without_its_word() {
        let cases: &[(&str, &str, bool)] = &[
            (r"^pbjs-\w+$", "pbjs-", true),
            (r"^_ga(?:_\w+)?$", "_ga", true),
            ("^_ga?x", "_g", true),
            ("^ab*", "a", true),
            ("^ab{2}", "a", true),
            ("^ab|cd", "", false),
            ("__utm", "__utm", false),
            (
                "MULTIPART_HEADERS_CONTENT_TYPES_*",
                "multipart_headers_content_types",
                false,
            ),
            ("ab|cd", "", false),
            (r"^\w", "", true),
            (r"\wab", "", false),
        ];
        for (pattern, folded, at_start) in cases {
            let want = Word {
                folded: folded.to_string(),
                at_start: *at_start,
            };
            assert_eq!(required_word(pattern), want, "{pattern}");
        }
        let t = Targets::parse(
            r"REQUEST_COOKIES:/^pbjs-\w+$/|ARGS:/^_ga?x/|ARGS:/^ab|cd/|TX:/MULTIPART_HEADERS_CONTENT_TYPES_*/|ARGS:/ab|cd/",
        )
        .expect("parses");
        let [pbjs, gax, alt, multipart, inner] = [0, 1, 2, 3, 4].map(|i| &t.targets[i].selector);
        assert!(pbjs.matches("pbjs-abc") && pbjs.matches("PBJS-x"));
        assert!(!pbjs.matches("pbj") && !pbjs.matches("xpbjs-a") && !pbjs.matches("pbjs-"));
        assert!(gax.matches("_gx") && gax.matches("_GAX") && !gax.matches("_ax"));
        assert!(alt.matches("cd") && alt.matches("abz") && !alt.matches("zz"));
        assert!(multipart.matches("multipart_headers_content_types_x"));
        assert!(multipart.matches("x_Multipart_Headers_Content_Types"));
        assert!(!multipart.matches("multipart_headers_content_type"));
        assert!(!multipart.matches("anomaly_score"));
        assert!(inner.matches("xcdx") && inner.matches("ab") && !inner.matches("ac"));
        // A key outside ASCII is the regex's to judge (Unicode folding: U+017F is `s`).
        assert!(pbjs.matches("pbj\u{17f}-a"));
        assert!(multipart.matches("multipart_headers_content_type\u{17f}"));
        // Shorter than the word: no match, whatever its bytes (U+212A is `k`).
        assert!(multipart.matches("MULTIPART_HEADERS_CONTENT_TYPES"));
        assert!(!multipart.matches("multipart_headers_content_typ"));
        assert!(!multipart.matches("\u{212a}"));
        let kelvin = Targets::parse("TX:/kk/").expect("parses");
        assert!(kelvin.targets[0].selector.matches("\u{212a}k"));
        assert!(!kelvin.targets[0].selector.matches("k"));
    }

    /// On keys stored lowercased (TX's), the byte-for-byte comparison answers as `matches`.
    #[test]
    fn folded_keys_match_as_any_key() {
        let t = Targets::parse(r"TX:/^header_name_/|TX:score|TX:/^_ga?x/|TX|TX:/MULTI_*/")
            .expect("parses");
        let keys = [
            "header_name_920450_host",
            "header_name_",
            "header_nam",
            "x_header_name_",
            "score",
            "scores",
            "_gx",
            "_gax",
            "multi",
            "a_multi_b",
            "",
        ];
        for target in &t.targets {
            for key in keys {
                assert_eq!(
                    target.selector.matches_folded(key),
                    target.selector.matches(key),
                    "{:?} on {key}",
                    target.selector
                );
            }
        }
    }

    #[test]
    fn rejects_unknown_variable() {
        assert!(Targets::parse("NOPE").is_err());
    }
}
