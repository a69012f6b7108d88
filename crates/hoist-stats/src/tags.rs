//! Envoy's default tag extraction, for the Prometheus rendering.
//!
//! Envoy turns `listener.0.0.0.0_10443.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256` into the metric
//! `listener.ssl.ciphers` with tags `envoy.ssl_cipher` and `envoy.listener_address`. The rules
//! are ported from source/common/config/well_known_names.cc (the subset for the stats hoist
//! emits), and applied as source/common/stats/tag_producer_impl.cc applies them: every rule
//! sees the full name, the removed spans are collected and cut out at the end, and the rules
//! run in Envoy's order (those without a leading literal token first, then those keyed by the
//! name's first token), which is the order the tags are printed in.

use std::sync::{LazyLock, OnceLock};

use regex::Regex;

/// A stat's full name and, computed on first use, its tag-extracted form.
pub(crate) struct StatName {
    name: String,
    extracted: OnceLock<TagExtracted>,
}

impl StatName {
    pub(crate) fn new(name: &str) -> StatName {
        StatName {
            name: name.to_owned(),
            extracted: OnceLock::new(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.name
    }

    pub(crate) fn extracted(&self) -> &TagExtracted {
        self.extracted.get_or_init(|| extract(&self.name))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    /// Envoy's tag name, e.g. `envoy.listener_address`.
    pub name: &'static str,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagExtracted {
    /// The name with the tag values cut out, e.g. `listener.ssl.ciphers`.
    pub name: String,
    pub tags: Vec<Tag>,
}

enum Rule {
    /// RE2 partial match: group 1 is removed from the name, group 2 (or 1) is the value.
    Regex {
        regex: Regex,
        /// Envoy's negative_match: a value equal to this is not a tag (`listener.admin.`).
        negative: Option<&'static str>,
    },
    /// Envoy's tokenized form: `$` is the value, `*` one token, `**` one or more tokens.
    Tokens(Vec<&'static str>),
}

struct Extractor {
    tag: &'static str,
    /// The literal first token the rule requires, if any (Envoy indexes rules by it).
    prefix: Option<&'static str>,
    rule: Rule,
}

// Envoy's expandRegex() substitutions.
const ADDRESS: &str = r"(?:(?:\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[[a-fA-F_\d]+\])_\d+)";
const CIPHER: &str = r"[\w-]+";
const TLS_VERSION: &str = r"TLSv\d\.\d";
const TAG_VALUE: &str = r"[^\.]+";
const LISTENER_OR_CLUSTER_WITH_NAME: &str = r"(?:listener|cluster)\..*?";

fn regex(tag: &'static str, prefix: Option<&'static str>, pattern: &str) -> Extractor {
    let pattern = pattern
        .replace("<ADDRESS>", ADDRESS)
        .replace("<CIPHER>", CIPHER)
        .replace("<TLS_VERSION>", TLS_VERSION)
        .replace("<TAG_VALUE>", TAG_VALUE)
        .replace(
            "<LISTENER_OR_CLUSTER_WITH_NAME>",
            LISTENER_OR_CLUSTER_WITH_NAME,
        );
    Extractor {
        tag,
        prefix,
        rule: Rule::Regex {
            regex: Regex::new(&pattern).expect("built-in tag regexes compile"),
            negative: None,
        },
    }
}

fn tokens(tag: &'static str, pattern: &'static str) -> Extractor {
    let tokens: Vec<&'static str> = pattern.split('.').collect();
    let prefix = tokens
        .first()
        .copied()
        .filter(|t| !matches!(*t, "$" | "*" | "**"));
    Extractor {
        tag,
        prefix,
        rule: Rule::Tokens(tokens),
    }
}

/// The rules in well_known_names.cc order: regex rules first, then tokenized ones.
static EXTRACTORS: LazyLock<Vec<Extractor>> = LazyLock::new(|| {
    let mut listener_address = regex(
        "envoy.listener_address",
        Some("listener"),
        r"^listener\.((<ADDRESS>|<TAG_VALUE>)\.)",
    );
    if let Rule::Regex { negative, .. } = &mut listener_address.rule {
        *negative = Some("admin");
    }
    vec![
        regex("envoy.response_code", None, r"_rq(_(\d{3}))$"),
        regex("envoy.response_code_class", None, r"_rq_((\d))xx$"),
        regex(
            "envoy.ssl_cipher",
            Some("listener"),
            r"^listener\..*?\.ssl\.ciphers(\.(<CIPHER>))$",
        ),
        regex(
            "envoy.ssl_curve",
            None,
            r"^<LISTENER_OR_CLUSTER_WITH_NAME>\.ssl\.curves(\.(<CIPHER>))$",
        ),
        regex(
            "envoy.ssl_sigalg",
            None,
            r"^<LISTENER_OR_CLUSTER_WITH_NAME>\.ssl\.sigalgs(\.(<CIPHER>))$",
        ),
        regex(
            "envoy.ssl_version",
            None,
            r"^<LISTENER_OR_CLUSTER_WITH_NAME>\.ssl\.versions(\.(<TLS_VERSION>))$",
        ),
        regex(
            "envoy.ssl_cipher_suite",
            Some("cluster"),
            r"^cluster\.<TAG_VALUE>\.ssl\.ciphers(\.(<CIPHER>))$",
        ),
        regex(
            "envoy.http_conn_manager_prefix",
            Some("listener"),
            r"^listener\..*?\.http\.((<TAG_VALUE>)\.)",
        ),
        regex(
            "envoy.worker_id",
            None,
            r"^(?:listener\.(?:<ADDRESS>|<TAG_VALUE>)\.|server\.|listener_manager\.)worker_((\d+)\.)",
        ),
        listener_address,
        tokens("envoy.cluster_name", "cluster.$.**"),
        tokens("envoy.http_conn_manager_prefix", "http.$.**"),
        tokens("envoy.virtual_host", "vhost.$.**"),
        tokens(
            "envoy.local_http_ratelimit_prefix",
            "$.http_local_rate_limit.**",
        ),
    ]
});

/// Applies Envoy's default tag extractors to `name`.
pub fn extract(name: &str) -> TagExtracted {
    let first_token = name.split_once('.').map(|(first, _)| first);
    let mut tags: Vec<Tag> = Vec::new();
    let mut removed: Vec<(usize, usize)> = Vec::new();
    let unprefixed = EXTRACTORS.iter().filter(|e| e.prefix.is_none());
    let prefixed = EXTRACTORS
        .iter()
        .filter(|e| e.prefix.is_some() && e.prefix == first_token);
    for extractor in unprefixed.chain(prefixed) {
        // Two rules share a tag name (http_conn_manager_prefix); the first match wins.
        if tags.iter().any(|t| t.name == extractor.tag) {
            continue;
        }
        let found = match &extractor.rule {
            Rule::Regex { regex, negative } => apply_regex(regex, *negative, name),
            Rule::Tokens(pattern) => apply_tokens(pattern, name),
        };
        if let Some((value, span)) = found {
            tags.push(Tag {
                name: extractor.tag,
                value,
            });
            removed.push(span);
        }
    }
    TagExtracted {
        name: remove_spans(name, removed),
        tags,
    }
}

fn apply_regex(
    regex: &Regex,
    negative: Option<&str>,
    name: &str,
) -> Option<(String, (usize, usize))> {
    let caps = regex.captures(name)?;
    let remove = caps.get(1).filter(|m| !m.as_str().is_empty())?;
    let value = caps
        .get(2)
        .filter(|m| !m.as_str().is_empty())
        .unwrap_or(remove)
        .as_str();
    if negative == Some(value) {
        return None;
    }
    Some((value.to_owned(), (remove.start(), remove.end())))
}

fn apply_tokens(pattern: &[&str], name: &str) -> Option<(String, (usize, usize))> {
    let input: Vec<&str> = name.split('.').collect();
    let (index, start) = search_tokens(pattern, &input, 0, 0, 0, None).flatten()?;
    let value = input[index];
    // Remove the dot after the value, or before it when the value is the last token.
    let span = if index + 1 < input.len() {
        (start, start + value.len() + 1)
    } else {
        (start.saturating_sub(1), start + value.len())
    };
    Some((value.to_owned(), span))
}

/// Envoy's TagExtractorTokensImpl::searchTags. Returns None when the pattern does not match,
/// else the input index of the `$` token and its byte offset in the name (None if the pattern
/// has no `$`, which the built-in patterns always have).
fn search_tokens(
    pattern: &[&str],
    input: &[&str],
    mut i: usize,
    mut p: usize,
    mut offset: usize,
    mut found: Option<(usize, usize)>,
) -> Option<Option<(usize, usize)>> {
    while i < input.len() && p < pattern.len() {
        match pattern[p] {
            "$" => found = Some((i, offset)),
            "**" if p == pattern.len() - 1 => return Some(found),
            "**" => {
                // Match the rest of the pattern against every suffix of the input, the empty
                // one included.
                let mut offset = offset;
                for start in i..input.len() {
                    if let Some(m) = search_tokens(pattern, input, start, p + 1, offset, found) {
                        return Some(m);
                    }
                    offset += input[start].len() + 1;
                }
                return None;
            }
            "*" => {}
            literal if literal != input[i] => return None,
            _ => {}
        }
        offset += input[i].len() + 1;
        i += 1;
        p += 1;
    }
    (p == pattern.len() && i == input.len()).then_some(found)
}

fn remove_spans(name: &str, mut spans: Vec<(usize, usize)>) -> String {
    spans.sort_unstable();
    let mut out = String::with_capacity(name.len());
    let mut pos = 0;
    for (start, end) in spans {
        if start > pos {
            out.push_str(&name[pos..start]);
        }
        pos = pos.max(end);
    }
    if pos < name.len() {
        out.push_str(&name[pos..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, extracted: &str, tags: &[(&str, &str)]) {
        let got = extract(name);
        assert_eq!(got.name, extracted, "tag-extracted name of {name}");
        let got_tags: Vec<(&str, &str)> = got
            .tags
            .iter()
            .map(|t| (t.name, t.value.as_str()))
            .collect();
        assert_eq!(got_tags, tags, "tags of {name}");
    }

    #[test]
    fn listener_ssl_stats() {
        check(
            "listener.0.0.0.0_10443.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256",
            "listener.ssl.ciphers",
            &[
                ("envoy.ssl_cipher", "ECDHE-RSA-AES128-GCM-SHA256"),
                ("envoy.listener_address", "0.0.0.0_10443"),
            ],
        );
        check(
            "listener.0.0.0.0_10443.ssl.curves.X25519",
            "listener.ssl.curves",
            &[
                ("envoy.ssl_curve", "X25519"),
                ("envoy.listener_address", "0.0.0.0_10443"),
            ],
        );
        check(
            "listener.0.0.0.0_10443.ssl.versions.TLSv1.2",
            "listener.ssl.versions",
            &[
                ("envoy.ssl_version", "TLSv1.2"),
                ("envoy.listener_address", "0.0.0.0_10443"),
            ],
        );
        check(
            "listener.0.0.0.0_10443.ssl.sigalgs.rsa_pss_rsae_sha256",
            "listener.ssl.sigalgs",
            &[
                ("envoy.ssl_sigalg", "rsa_pss_rsae_sha256"),
                ("envoy.listener_address", "0.0.0.0_10443"),
            ],
        );
        check(
            "listener.[__1]_10443.ssl.handshake",
            "listener.ssl.handshake",
            &[("envoy.listener_address", "[__1]_10443")],
        );
        check(
            "listener.127.0.0.1_3012.downstream_cx_total",
            "listener.downstream_cx_total",
            &[("envoy.listener_address", "127.0.0.1_3012")],
        );
    }

    #[test]
    fn admin_listener_is_not_an_address() {
        check(
            "listener.admin.http.admin.downstream_rq_4xx",
            "listener.admin.http.downstream_rq_xx",
            &[
                ("envoy.response_code_class", "4"),
                ("envoy.http_conn_manager_prefix", "admin"),
            ],
        );
    }

    #[test]
    fn connection_manager_stats() {
        check(
            "http.ingress_http.downstream_rq_2xx",
            "http.downstream_rq_xx",
            &[
                ("envoy.response_code_class", "2"),
                ("envoy.http_conn_manager_prefix", "ingress_http"),
            ],
        );
        check(
            "http.ingress_http.downstream_rq_200",
            "http.downstream_rq",
            &[
                ("envoy.response_code", "200"),
                ("envoy.http_conn_manager_prefix", "ingress_http"),
            ],
        );
        check(
            "http.ingress_http.downstream_rq_time",
            "http.downstream_rq_time",
            &[("envoy.http_conn_manager_prefix", "ingress_http")],
        );
        check(
            "http.ingress_http.jwt_authn.allowed",
            "http.jwt_authn.allowed",
            &[("envoy.http_conn_manager_prefix", "ingress_http")],
        );
        check(
            "listener.127.0.0.1_3012.http.http_prefix.downstream_rq_5xx",
            "listener.http.downstream_rq_xx",
            &[
                ("envoy.response_code_class", "5"),
                ("envoy.http_conn_manager_prefix", "http_prefix"),
                ("envoy.listener_address", "127.0.0.1_3012"),
            ],
        );
    }

    #[test]
    fn cluster_rate_limit_and_plain_names() {
        check(
            "cluster.backend.upstream_rq_total",
            "cluster.upstream_rq_total",
            &[("envoy.cluster_name", "backend")],
        );
        check(
            "cluster.backend.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256",
            "cluster.ssl.ciphers",
            &[
                ("envoy.ssl_cipher_suite", "ECDHE-RSA-AES128-GCM-SHA256"),
                ("envoy.cluster_name", "backend"),
            ],
        );
        check(
            "http_local_rate_limiter.http_local_rate_limit.rate_limited",
            "http_local_rate_limit.rate_limited",
            &[(
                "envoy.local_http_ratelimit_prefix",
                "http_local_rate_limiter",
            )],
        );
        check(
            // Envoy cuts only the id: `worker_` stays in the name.
            "listener_manager.worker_3.dispatcher.loop_duration_us",
            "listener_manager.worker_dispatcher.loop_duration_us",
            &[("envoy.worker_id", "3")],
        );
        check("server.live", "server.live", &[]);
        check("http", "http", &[]);
        check("", "", &[]);
    }

    #[test]
    fn token_patterns() {
        let input: Vec<&str> = "a.x.b.b.c.d".split('.').collect();
        assert_eq!(
            search_tokens(&["a", "**", "b", "c", "$"], &input, 0, 0, 0, None),
            Some(Some((5, 10)))
        );
        // `**` at the end needs at least one token.
        let input: Vec<&str> = "foo.http_local_rate_limit".split('.').collect();
        assert_eq!(
            search_tokens(&["$", "http_local_rate_limit", "**"], &input, 0, 0, 0, None),
            None
        );
    }
}
