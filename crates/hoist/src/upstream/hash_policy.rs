//! A route's `hash_policy`: the request's hash for RING_HASH and MAGLEV clusters, computed as
//! Envoy does (xxHash64 of each source; several policies combined by rotating the hash so far
//! one bit left and XOR-ing the next; a terminal policy that produced a hash ends the list).

use std::net::IpAddr;

use hoist_config::model::{HashPolicy, HashSource};
use hoist_http::RequestHead;

use super::xxhash::xxh64;

/// The hash of a request on its way through a route, computed on the request as the client
/// sent it, before rewrites (Envoy's order).
pub fn for_request(
    cx: &super::forward::Context<'_>,
    action: &hoist_config::model::ForwardAction,
    head: &RequestHead,
) -> Option<u64> {
    if action.hash_policy.is_empty() {
        return None;
    }
    let client = super::headers::trusted_client_address(
        head,
        cx.use_remote_address,
        cx.xff_num_trusted_hops,
    )
    .unwrap_or_else(|| cx.conn.remote.ip().to_canonical());
    request_hash(&action.hash_policy, head, client)
}

/// None when no policy applies (no policy, or none of their sources is in the request).
pub fn request_hash(policies: &[HashPolicy], head: &RequestHead, source: IpAddr) -> Option<u64> {
    let mut hash: Option<u64> = None;
    for p in policies {
        if let Some(new) = evaluate(&p.source, head, source) {
            hash = Some(hash.map_or(0, |h| h.rotate_left(1)) ^ new);
        }
        if p.terminal && hash.is_some() {
            break;
        }
    }
    hash
}

fn evaluate(source: &HashSource, head: &RequestHead, ip: IpAddr) -> Option<u64> {
    match source {
        HashSource::Header(name) => {
            let mut values: Vec<&[u8]> = match name.as_str() {
                ":path" => vec![head.path.as_bytes()],
                ":method" => vec![head.method.as_str().as_bytes()],
                ":authority" => vec![head.authority.as_deref()?.as_bytes()],
                _ => head
                    .headers
                    .get_all(name.as_str())
                    .iter()
                    .map(|v| v.as_bytes())
                    .collect(),
            };
            if values.is_empty() {
                return None;
            }
            // Envoy sorts repeated values so their order does not change the host.
            values.sort_unstable();
            Some(xxh64(&values.concat(), 0))
        }
        HashSource::Cookie(name) => cookie(head, name).map(|v| xxh64(v.as_bytes(), 0)),
        HashSource::SourceIp => Some(xxh64(ip.to_string().as_bytes(), 0)),
        HashSource::QueryParameter(name) => {
            query_parameter(&head.path, name).map(|v| xxh64(v.as_bytes(), 0))
        }
    }
}

/// The first cookie called `name` in the request's Cookie headers.
fn cookie<'h>(head: &'h RequestHead, name: &str) -> Option<&'h str> {
    head.headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim_matches('"'))
}

/// The first value of `name` in the query string (Envoy does not percent-decode it).
fn query_parameter<'p>(path: &'p str, name: &str) -> Option<&'p str> {
    let (_, query) = path.split_once('?')?;
    let query = query.split('#').next().unwrap_or(query);
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoist_http::Version;
    use http::{HeaderMap, HeaderValue, Method};

    fn head(path: &str, headers: &[(&str, &str)]) -> RequestHead {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        RequestHead {
            method: Method::GET,
            path: path.into(),
            version: Version::Http11,
            authority: Some("example.com".into()),
            headers: h,
        }
    }

    fn policy(source: HashSource, terminal: bool) -> HashPolicy {
        HashPolicy { source, terminal }
    }

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn each_source_hashes_its_value() {
        let h = head(
            "/p?a=1&id=42&id=7",
            &[("x-user", "alice"), ("cookie", "x=1; session=abc")],
        );
        let one = |s: HashSource| request_hash(&[policy(s, false)], &h, IP);
        assert_eq!(
            one(HashSource::Header("x-user".into())),
            Some(xxh64(b"alice", 0))
        );
        assert_eq!(
            one(HashSource::Cookie("session".into())),
            Some(xxh64(b"abc", 0))
        );
        assert_eq!(
            one(HashSource::QueryParameter("id".into())),
            Some(xxh64(b"42", 0))
        );
        assert_eq!(one(HashSource::SourceIp), Some(xxh64(b"127.0.0.1", 0)));
        assert_eq!(
            one(HashSource::Header(":authority".into())),
            Some(xxh64(b"example.com", 0))
        );
        assert_eq!(one(HashSource::Header("x-none".into())), None);
        assert_eq!(one(HashSource::Cookie("none".into())), None);
        assert_eq!(one(HashSource::QueryParameter("none".into())), None);
    }

    #[test]
    fn policies_combine_and_terminal_stops() {
        let h = head("/", &[("x-a", "1"), ("x-b", "2")]);
        let a = policy(HashSource::Header("x-a".into()), false);
        let b = policy(HashSource::Header("x-b".into()), false);
        let missing = policy(HashSource::Header("x-none".into()), true);
        let (ha, hb) = (xxh64(b"1", 0), xxh64(b"2", 0));
        assert_eq!(
            request_hash(&[a.clone(), b.clone()], &h, IP),
            Some(ha.rotate_left(1) ^ hb)
        );
        // The same rule twice does not cancel out.
        assert_ne!(request_hash(&[a.clone(), a.clone()], &h, IP), Some(0));
        let terminal_a = policy(HashSource::Header("x-a".into()), true);
        assert_eq!(request_hash(&[terminal_a, b.clone()], &h, IP), Some(ha));
        // A terminal policy without a hash does not stop the list.
        assert_eq!(request_hash(&[missing, b], &h, IP), Some(hb));
        // Repeated header values hash the same in any order.
        let x = head("/", &[("x-a", "1"), ("x-a", "2")]);
        let y = head("/", &[("x-a", "2"), ("x-a", "1")]);
        assert_eq!(
            request_hash(std::slice::from_ref(&a), &x, IP),
            request_hash(&[a], &y, IP)
        );
    }
}
