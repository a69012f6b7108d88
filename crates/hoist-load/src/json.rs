//! The `-json` result, with Fortio's field names in Fortio's order (the order Go's encoder
//! gives `fhttp.HTTPRunnerResults`: the runner results, RetCodes, the embedded HTTP options
//! with URL and NumConnections, then Sizes, HeaderSizes, Sockets, SocketCount), followed by
//! hoist's own fields (Gbps, BytesReceived, ClientThreads, TLSVersion, Cipher).

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::histogram::HistogramData;
use crate::result::{RunResult, VERSION};

impl RunResult {
    /// The JSON document `fortio load -json` writes, plus hoist's fields.
    pub fn to_json(&self) -> Value {
        let o = &self.options;
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        put("RunType", json!("HTTP"));
        put("Labels", json!(self.labels));
        put("StartTime", json!(rfc3339(self.start_time)));
        put("RequestedQPS", json!(self.requested_qps));
        put("RequestedDuration", json!(self.requested_duration));
        put("ActualQPS", json!(self.actual_qps));
        put(
            "ActualDuration",
            json!(u64::try_from(self.actual_duration.as_nanos()).unwrap_or(u64::MAX)),
        );
        put("NumThreads", json!(self.num_connections));
        put("Version", json!(VERSION));
        put("DurationHistogram", histogram(&self.histogram));
        put("ErrorsDurationHistogram", histogram(&self.errors));
        put("Exactly", json!(self.plan.exactly.unwrap_or(0)));
        put("Jitter", json!(o.jitter));
        put("Uniform", json!(o.uniform));
        put("NoCatchUp", json!(false));
        put("RunID", json!(0));
        put("AccessLoggerInfo", json!(""));
        put("ID", json!(run_id(self.start_time, &self.labels)));
        let codes: Map<String, Value> = self
            .ret_codes
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        put("RetCodes", Value::Object(codes));
        let mut ips = Map::new();
        ips.insert(self.resolved.clone(), json!(self.sockets_used));
        put("IPCountMap", Value::Object(ips));
        put("Insecure", json!(o.insecure));
        put("MTLS", json!(false));
        put("CACert", json!(path(&o.ca_cert)));
        put("Cert", json!(path(&o.client_cert)));
        put("Key", json!(path(&o.client_key)));
        put("UnixDomainSocket", json!(""));
        put("URL", json!(self.url));
        put("NumConnections", json!(self.num_connections));
        put("Compression", json!(false));
        put("DisableFastClient", json!(false));
        put("HTTP10", json!(o.http10));
        put("H2", json!(false));
        put("DisableKeepAlive", json!(!o.keepalive));
        put("AllowHalfClose", json!(false));
        put("FollowRedirects", json!(false));
        put(
            "Resolve",
            json!(o.resolve.map(|ip| ip.to_string()).unwrap_or_default()),
        );
        put(
            "HTTPReqTimeOut",
            json!(u64::try_from(o.timeout.as_nanos()).unwrap_or(u64::MAX)),
        );
        put("UserCredentials", json!(""));
        put(
            "ContentType",
            json!(o.content_type.clone().unwrap_or_default()),
        );
        put(
            "Payload",
            if o.payload.is_empty() {
                Value::Null
            } else {
                json!(base64::engine::general_purpose::STANDARD.encode(&o.payload))
            },
        );
        put(
            "MethodOverride",
            json!(o.method.clone().unwrap_or_default()),
        );
        put("LogErrors", json!(false));
        put("SequentialWarmup", json!(false));
        put("ConnReuseRange", json!([0, 0]));
        put("NoResolveEachConn", json!(false));
        put("Offset", json!(0));
        put("Resolution", json!(o.resolution));
        put("Sizes", histogram(&self.sizes));
        put("HeaderSizes", histogram(&self.header_sizes));
        put("Sockets", json!(self.sockets));
        put("SocketCount", json!(self.sockets_used));
        put("ConnectionStats", histogram(&self.connection_stats));
        put("AbortOn", json!(o.abort_on.unwrap_or(0)));
        put("Gbps", json!(self.gbps()));
        put("BytesReceived", json!(self.bytes_received));
        put("ClientThreads", json!(self.client_threads));
        let (version, cipher) = self
            .negotiated
            .as_ref()
            .map_or((String::new(), String::new()), |n| {
                (n.version.clone(), n.cipher.clone())
            });
        put("TLSVersion", json!(version));
        put("Cipher", json!(cipher));
        Value::Object(m)
    }
}

fn path(p: &Option<std::path::PathBuf>) -> String {
    p.as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// Fortio's `HistogramData`: Data is null without samples, Percentiles omitted when empty.
fn histogram(h: &HistogramData) -> Value {
    let mut m = Map::new();
    m.insert("Count".into(), json!(h.count));
    m.insert("Min".into(), json!(h.min));
    m.insert("Max".into(), json!(h.max));
    m.insert("Sum".into(), json!(h.sum));
    m.insert("Avg".into(), json!(h.avg));
    m.insert("StdDev".into(), json!(h.std_dev));
    let data = if h.data.is_empty() {
        Value::Null
    } else {
        Value::Array(
            h.data
                .iter()
                .map(|b| {
                    json!({"Start": b.start, "End": b.end, "Percent": b.percent, "Count": b.count})
                })
                .collect(),
        )
    };
    m.insert("Data".into(), data);
    if !h.percentiles.is_empty() {
        m.insert(
            "Percentiles".into(),
            Value::Array(
                h.percentiles
                    .iter()
                    .map(|p| json!({"Percentile": p.percentile, "Value": p.value}))
                    .collect(),
            ),
        );
    }
    Value::Object(m)
}

/// Civil date and time (UTC) of a Unix timestamp: (year, month, day, hour, minute, second).
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

/// RFC 3339 with nanoseconds, in UTC, as Go's `time.Time` marshals ("...T21:50:46.1234Z").
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (y, mo, da, h, mi, s) = civil(d.as_secs());
    let mut out = format!("{y:04}-{mo:02}-{da:02}T{h:02}:{mi:02}:{s:02}");
    let nanos = d.subsec_nanos();
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// Fortio's run ID: the start time "YYYY-MM-DD-hhmmss", then the labels with runs of
/// characters other than letters and digits folded to one '_', at most 96 characters.
fn run_id(t: SystemTime, labels: &str) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (y, mo, da, h, mi, s) = civil(secs);
    let mut id = format!("{y:04}-{mo:02}-{da:02}-{h:02}{mi:02}{s:02}");
    if labels.is_empty() {
        return id;
    }
    id.push('_');
    let mut last = '_';
    for c in labels.chars() {
        if c.is_ascii_alphanumeric() {
            last = c;
        } else if last == '_' {
            continue;
        } else {
            last = '_';
        }
        id.push(last);
    }
    if id.ends_with('_') {
        id.pop();
    }
    id.chars().take(96).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_and_ids() {
        let t = UNIX_EPOCH + Duration::new(1_783_720_246, 123_400_000);
        assert_eq!(rfc3339(t), "2026-07-10T21:50:46.1234Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            run_id(t, "127.0.0.1:10443/10m , box"),
            "2026-07-10-215046_127_0_0_1_10443_10m_box"
        );
        assert_eq!(run_id(t, ""), "2026-07-10-215046");
    }

    #[test]
    fn fortio_field_names_and_order() {
        let v = crate::result::tests::sample().to_json();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            vec![
                "RunType",
                "Labels",
                "StartTime",
                "RequestedQPS",
                "RequestedDuration",
                "ActualQPS",
                "ActualDuration",
                "NumThreads",
                "Version",
                "DurationHistogram",
                "ErrorsDurationHistogram",
                "Exactly",
                "Jitter",
                "Uniform",
                "NoCatchUp",
                "RunID",
                "AccessLoggerInfo",
                "ID",
                "RetCodes",
                "IPCountMap",
                "Insecure",
                "MTLS",
                "CACert",
                "Cert",
                "Key",
                "UnixDomainSocket",
                "URL",
                "NumConnections",
                "Compression",
                "DisableFastClient",
                "HTTP10",
                "H2",
                "DisableKeepAlive",
                "AllowHalfClose",
                "FollowRedirects",
                "Resolve",
                "HTTPReqTimeOut",
                "UserCredentials",
                "ContentType",
                "Payload",
                "MethodOverride",
                "LogErrors",
                "SequentialWarmup",
                "ConnReuseRange",
                "NoResolveEachConn",
                "Offset",
                "Resolution",
                "Sizes",
                "HeaderSizes",
                "Sockets",
                "SocketCount",
                "ConnectionStats",
                "AbortOn",
                "Gbps",
                "BytesReceived",
                "ClientThreads",
                "TLSVersion",
                "Cipher",
            ]
        );
        assert_eq!(v["StartTime"], "2026-07-10T21:50:46Z");
        assert_eq!(v["RequestedQPS"], "max");
        assert_eq!(v["RequestedDuration"], "exactly 4 calls");
        assert_eq!(v["ActualDuration"], 2_000_000_000u64);
        assert_eq!(v["NumThreads"], 2);
        assert_eq!(v["Version"], crate::result::VERSION);
        assert_eq!(v["ID"], "2026-07-10-215046_test");
        assert_eq!(v["RetCodes"], json!({"200": 3, "503": 1}));
        assert_eq!(v["HTTPReqTimeOut"], 3_000_000_000u64);
        assert!(v["Payload"].is_null());
        assert_eq!(v["Sockets"], json!([1, 2]));
        assert_eq!(v["SocketCount"], 3);
        assert_eq!(v["Cipher"], "ECDHE-RSA-AES256-GCM-SHA384");
        let h = &v["DurationHistogram"];
        assert_eq!(
            h.as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            vec![
                "Count",
                "Min",
                "Max",
                "Sum",
                "Avg",
                "StdDev",
                "Data",
                "Percentiles"
            ]
        );
        assert_eq!(
            h["Data"][1],
            json!({"Start": 0.002, "End": 0.003, "Percent": 75.0, "Count": 2})
        );
        assert_eq!(
            h["Percentiles"][0],
            json!({"Percentile": 50.0, "Value": 0.0025})
        );
        // Sizes carry no percentiles, as in Fortio.
        assert!(v["Sizes"].get("Percentiles").is_none());
        assert_eq!(v["Sizes"]["Sum"], 3522.0);
    }
}
