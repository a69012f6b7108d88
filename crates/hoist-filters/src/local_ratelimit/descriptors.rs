//! Request descriptors: what the rate limit actions make of a request, and which configured
//! `descriptors` they select.

use std::borrow::Cow;
use std::net::IpAddr;

use hoist_config::model::{RateLimit, RateLimitAction};
use hoist_http::RequestHead;

use super::limiter::LimiterSpec;

/// What the actions read from a request.
pub struct Request<'a> {
    pub head: &'a RequestHead,
    pub remote: IpAddr,
    /// `:scheme`: "https" on a TLS connection, else "http".
    pub scheme: &'static str,
}

impl<'a> Request<'a> {
    /// The first value of a header (a pseudo-header from the head), as Envoy's
    /// `request_headers` action takes it.
    fn first_value(&self, name: &str) -> Option<&'a [u8]> {
        let head = self.head;
        match name {
            ":method" => Some(head.method.as_str().as_bytes()),
            ":path" => Some(head.path.as_bytes()),
            ":authority" => head.authority.as_deref().map(str::as_bytes),
            ":scheme" => Some(self.scheme.as_bytes()),
            _ => head.headers.get(name).map(|v| v.as_bytes()),
        }
    }

    /// All values of a header joined by ",", as Envoy's header matchers see them.
    fn joined_value(&self, name: &str) -> Option<Cow<'a, str>> {
        let head = self.head;
        match name {
            ":method" => Some(Cow::Borrowed(head.method.as_str())),
            ":path" => Some(Cow::Borrowed(head.path.as_str())),
            ":authority" => head.authority.as_deref().map(Cow::Borrowed),
            ":scheme" => Some(Cow::Borrowed(self.scheme)),
            _ => {
                let mut values = head.headers.get_all(name).iter();
                let first = values.next()?.to_str().unwrap_or("");
                let Some(second) = values.next() else {
                    return Some(Cow::Borrowed(first));
                };
                let mut joined = format!("{first},{}", second.to_str().unwrap_or(""));
                for v in values {
                    joined.push(',');
                    joined.push_str(v.to_str().unwrap_or(""));
                }
                Some(Cow::Owned(joined))
            }
        }
    }
}

/// The configured descriptors (indices into `spec.descriptors`, ascending, so in consumption
/// order) that the descriptors `rate_limits` generate for `request` equal exactly. Each
/// generated descriptor selects at most one (configured descriptors are unique); two equal
/// generated descriptors select the same one twice, as in Envoy.
pub fn matched<'r>(
    spec: &LimiterSpec,
    rate_limits: impl Iterator<Item = &'r RateLimit>,
    request: &Request<'_>,
) -> Vec<usize> {
    let mut matched = Vec::new();
    let mut entries: Vec<(&str, Cow<'_, [u8]>)> = Vec::new();
    for rate_limit in rate_limits {
        entries.clear();
        if !generate(rate_limit, request, &mut entries) {
            continue;
        }
        let found = spec.descriptors.iter().position(|d| {
            d.entries.len() == entries.len()
                && d.entries
                    .iter()
                    .zip(&entries)
                    .all(|((k, v), (ek, ev))| k == ek && v.as_bytes() == ev.as_ref())
        });
        if let Some(i) = found {
            matched.push(i);
        }
    }
    matched.sort_unstable();
    matched
}

/// One descriptor from one `RateLimit`: false when an action drops it.
fn generate<'a>(
    rate_limit: &'a RateLimit,
    request: &Request<'a>,
    entries: &mut Vec<(&'a str, Cow<'a, [u8]>)>,
) -> bool {
    for action in &rate_limit.actions {
        match action {
            RateLimitAction::RequestHeaders {
                header_name,
                descriptor_key,
                skip_if_absent,
            } => match request.first_value(header_name) {
                Some(v) => entries.push((descriptor_key, Cow::Borrowed(v))),
                // skip_if_absent drops only this entry; otherwise the whole descriptor goes.
                None if *skip_if_absent => {}
                None => return false,
            },
            RateLimitAction::RemoteAddress => entries.push((
                "remote_address",
                Cow::Owned(request.remote.to_string().into_bytes()),
            )),
            RateLimitAction::GenericKey {
                descriptor_key,
                descriptor_value,
            } => entries.push((descriptor_key, Cow::Borrowed(descriptor_value.as_bytes()))),
            RateLimitAction::HeaderValueMatch {
                descriptor_key,
                descriptor_value,
                expect_match,
                headers,
            } => {
                let all = headers
                    .iter()
                    .all(|h| h.matches(request.joined_value(&h.name).as_deref()));
                if all != *expect_match {
                    return false;
                }
                entries.push((descriptor_key, Cow::Borrowed(descriptor_value.as_bytes())));
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_ratelimit::limiter::DescriptorSpec;
    use crate::local_ratelimit::token_bucket::TokenBucketSpec;
    use hoist_config::model::{HeaderMatchSpec, HeaderMatcher, StringMatch, StringMatcher};
    use hoist_http::Version;
    use std::time::Duration;

    fn head(headers: &[(&str, &str)]) -> RequestHead {
        let mut map = http::HeaderMap::new();
        for (k, v) in headers {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        RequestHead {
            method: http::Method::GET,
            path: "/api?x=1".into(),
            version: Version::Http11,
            authority: Some("example.com".into()),
            headers: map,
        }
    }

    fn spec(descriptors: &[&[(&str, &str)]]) -> LimiterSpec {
        let bucket = TokenBucketSpec {
            max_tokens: 1,
            tokens_per_fill: 1,
            fill_interval: Duration::from_secs(1),
        };
        LimiterSpec::new(
            bucket,
            descriptors
                .iter()
                .map(|d| DescriptorSpec {
                    entries: d
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    bucket,
                })
                .collect(),
            true,
        )
    }

    fn rl(actions: Vec<RateLimitAction>) -> RateLimit {
        RateLimit {
            stage: None,
            disable_key: String::new(),
            actions,
        }
    }

    fn header(name: &str, key: &str, skip: bool) -> RateLimitAction {
        RateLimitAction::RequestHeaders {
            header_name: name.into(),
            descriptor_key: key.into(),
            skip_if_absent: skip,
        }
    }

    fn run(spec: &LimiterSpec, limits: &[RateLimit], h: &RequestHead) -> Vec<usize> {
        let req = Request {
            head: h,
            remote: "10.1.2.3".parse().unwrap(),
            scheme: "https",
        };
        matched(spec, limits.iter(), &req)
    }

    #[test]
    fn request_headers_remote_address_and_generic_key() {
        let spec = spec(&[
            &[("user", "alice"), ("remote_address", "10.1.2.3")],
            &[("generic_key", "all")],
            &[("host", "example.com"), ("m", "GET")],
        ]);
        let limits = [
            rl(vec![
                header("x-user", "user", false),
                RateLimitAction::RemoteAddress,
            ]),
            rl(vec![RateLimitAction::GenericKey {
                descriptor_key: "generic_key".into(),
                descriptor_value: "all".into(),
            }]),
            rl(vec![
                header(":authority", "host", false),
                header(":method", "m", false),
            ]),
        ];
        assert_eq!(
            run(&spec, &limits, &head(&[("x-user", "alice")])),
            vec![0, 1, 2]
        );
        assert_eq!(run(&spec, &limits, &head(&[("x-user", "bob")])), vec![1, 2]);
    }

    #[test]
    fn a_missing_header_drops_the_descriptor_unless_skip_if_absent() {
        let spec = spec(&[&[("generic_key", "g")]]);
        let generic = RateLimitAction::GenericKey {
            descriptor_key: "generic_key".into(),
            descriptor_value: "g".into(),
        };
        let strict = [rl(vec![header("x-user", "user", false), generic.clone()])];
        let lenient = [rl(vec![header("x-user", "user", true), generic])];
        assert!(run(&spec, &strict, &head(&[])).is_empty());
        assert_eq!(run(&spec, &lenient, &head(&[])), vec![0]);
        // Present, the header's entry makes the descriptor longer than the configured one.
        assert!(run(&spec, &lenient, &head(&[("x-user", "a")])).is_empty());
    }

    #[test]
    fn descriptors_match_whole_and_in_order() {
        let spec = spec(&[&[("a", "1"), ("b", "2")]]);
        let limits = [rl(vec![
            header("x-b", "b", false),
            header("x-a", "a", false),
        ])];
        assert!(run(&spec, &limits, &head(&[("x-a", "1"), ("x-b", "2")])).is_empty());
        let limits = [rl(vec![
            header("x-a", "a", false),
            header("x-b", "b", false),
        ])];
        assert_eq!(
            run(&spec, &limits, &head(&[("x-a", "1"), ("x-b", "2")])),
            vec![0]
        );
        // The first value of a repeated header.
        assert_eq!(
            run(
                &spec,
                &limits,
                &head(&[("x-a", "1"), ("x-a", "9"), ("x-b", "2")])
            ),
            vec![0]
        );
    }

    #[test]
    fn header_value_match_with_and_without_expect_match() {
        let spec = spec(&[&[("header_match", "beta")]]);
        let matcher = HeaderMatcher {
            name: "x-tier".into(),
            spec: HeaderMatchSpec::String(StringMatcher {
                pattern: StringMatch::Exact("beta".into()),
                ignore_case: false,
            }),
            invert_match: false,
            treat_missing_as_empty: false,
        };
        let action = |expect_match| RateLimitAction::HeaderValueMatch {
            descriptor_key: "header_match".into(),
            descriptor_value: "beta".into(),
            expect_match,
            headers: vec![matcher.clone()],
        };
        let on_match = [rl(vec![action(true)])];
        let on_mismatch = [rl(vec![action(false)])];
        let beta = head(&[("x-tier", "beta")]);
        let gold = head(&[("x-tier", "gold")]);
        assert_eq!(run(&spec, &on_match, &beta), vec![0]);
        assert!(run(&spec, &on_match, &gold).is_empty());
        assert!(run(&spec, &on_mismatch, &beta).is_empty());
        assert_eq!(run(&spec, &on_mismatch, &gold), vec![0]);
    }

    #[test]
    fn equal_descriptors_select_the_same_bucket_twice() {
        let spec = spec(&[&[("generic_key", "g")]]);
        let g = rl(vec![RateLimitAction::GenericKey {
            descriptor_key: "generic_key".into(),
            descriptor_value: "g".into(),
        }]);
        assert_eq!(run(&spec, &[g.clone(), g], &head(&[])), vec![0, 0]);
    }
}
