//! The admin's `/stats` query parameters, parsed as Envoy's stats_params.cc parses them.

use regex::Regex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StatsFormat {
    #[default]
    Text,
    Json,
    Prometheus,
}

/// `type=`: which kinds of stats to show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StatsType {
    #[default]
    All,
    Counters,
    Gauges,
    Histograms,
    /// Accepted for compatibility; hoist has no text readouts, so this shows nothing.
    TextReadouts,
}

#[derive(Clone, Debug, Default)]
pub struct StatsParams {
    pub format: StatsFormat,
    /// `filter=<regex>`: RE2 partial match on the full stat name.
    pub filter: Option<Regex>,
    /// `usedonly`: hide stats never written.
    pub used_only: bool,
    pub stats_type: StatsType,
}

impl StatsParams {
    /// Parses a query string (`filter=ssl&usedonly`, with or without the leading `?`).
    /// Errors are the body of Envoy's 400 response.
    pub fn from_query(query: &str) -> Result<StatsParams, String> {
        let mut params = StatsParams::default();
        let pairs = parse_query(query.strip_prefix('?').unwrap_or(query));
        let get = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };

        params.used_only = get("usedonly").is_some();
        if let Some(filter) = get("filter") {
            params.filter = Some(Regex::new(filter).map_err(|_| "Invalid re2 regex".to_owned())?);
        }
        if let Some(mode) = get("histogram_buckets") {
            if mode != "none" {
                return Err(format!(
                    "histogram_buckets={mode} is not supported by hoist; only 'none' is"
                ));
            }
        }
        if let Some(t) = get("type") {
            params.stats_type = match t {
                "All" => StatsType::All,
                "Counters" => StatsType::Counters,
                "Gauges" => StatsType::Gauges,
                "Histograms" => StatsType::Histograms,
                "TextReadouts" => StatsType::TextReadouts,
                _ => return Err("invalid &type= param".to_owned()),
            };
        }
        if let Some(f) = get("format") {
            params.format = match f {
                "text" => StatsFormat::Text,
                "json" => StatsFormat::Json,
                "prometheus" => StatsFormat::Prometheus,
                _ => return Err("usage: /stats?format=(json|prometheus|text)\n\n".to_owned()),
            };
        }
        Ok(params)
    }

    pub(crate) fn shows(&self, name: &str, used: bool) -> bool {
        (!self.used_only || used) && self.filter.as_ref().is_none_or(|re| re.is_match(name))
    }
}

/// An admin query string `k=v&k2&...`, percent-decoded, as Envoy's admin parses it for every
/// endpoint. `+` stays a plus: Envoy does not decode it, and it is a regex quantifier in
/// `filter=`. The first occurrence of a key wins, as in Envoy.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let p = StatsParams::from_query("").unwrap();
        assert_eq!(p.format, StatsFormat::Text);
        assert_eq!(p.stats_type, StatsType::All);
        assert!(!p.used_only && p.filter.is_none());
    }

    #[test]
    fn parses_every_parameter() {
        let p =
            StatsParams::from_query("?filter=ssl%5C.ciphers&usedonly&type=Counters&format=json")
                .unwrap();
        assert_eq!(p.filter.as_ref().unwrap().as_str(), r"ssl\.ciphers");
        assert!(p.used_only);
        assert_eq!(p.stats_type, StatsType::Counters);
        assert_eq!(p.format, StatsFormat::Json);
        let p = StatsParams::from_query("filter=a+b&filter=zzz").unwrap();
        assert_eq!(p.filter.as_ref().unwrap().as_str(), "a+b");
    }

    #[test]
    fn errors_are_envoys() {
        assert_eq!(
            StatsParams::from_query("filter=(").unwrap_err(),
            "Invalid re2 regex"
        );
        assert_eq!(
            StatsParams::from_query("type=counters").unwrap_err(),
            "invalid &type= param"
        );
        assert!(StatsParams::from_query("format=xml")
            .unwrap_err()
            .starts_with("usage: /stats?format="));
        assert!(StatsParams::from_query("histogram_buckets=cumulative").is_err());
        assert!(StatsParams::from_query("histogram_buckets=none").is_ok());
    }

    #[test]
    fn filter_is_a_partial_match() {
        let p = StatsParams::from_query("filter=ssl").unwrap();
        assert!(p.shows("listener.0.0.0.0_10443.ssl.handshake", false));
        assert!(!p.shows("http.x.downstream_rq_total", true));
        let p = StatsParams::from_query("usedonly").unwrap();
        assert!(!p.shows("a", false));
        assert!(p.shows("a", true));
    }

    #[test]
    fn percent_decoding_keeps_malformed_escapes() {
        assert_eq!(percent_decode("a%2Eb"), "a.b");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%41"), "A");
    }
}
