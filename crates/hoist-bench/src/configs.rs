//! The experiment's five L7 configurations as stock Envoy bootstrap YAML: the same listener
//! (TLS 1.2, RSA-4096, one cipher, direct responses from files) with different HTTP filters.
//! A configuration whose filter hoist does not implement yet fails `--mode validate`, and its
//! cells are reported as skipped with that error, never faked.

use std::path::{Path, PathBuf};

use crate::workdir::WorkDir;

/// The HTTP filters of each configuration (router excluded), as YAML list items.
fn filters(name: &str, wd: &WorkDir, crs: Option<&Path>) -> Result<String, String> {
    let ratelimit = r#"          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
              stat_prefix: http_local_rate_limiter
              # Large enough never to reject: the cell measures the filter's cost, not 429s.
              token_bucket: {max_tokens: 100000000, tokens_per_fill: 100000000, fill_interval: 1s}
              filter_enabled: {runtime_key: local_rate_limit_enabled, default_value: {numerator: 100, denominator: HUNDRED}}
              filter_enforced: {runtime_key: local_rate_limit_enforced, default_value: {numerator: 100, denominator: HUNDRED}}
"#;
    let jwt = format!(
        r#"          - name: envoy.filters.http.jwt_authn
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
              providers:
                bench:
                  issuer: hoist-bench
                  audiences: [bench]
                  local_jwks: {{filename: {}}}
                  forward: true
                  # Verified tokens are cached (the experiment's clients reuse one token).
                  jwt_cache_config: {{jwt_cache_size: 1000}}
              rules:
              - match: {{prefix: /}}
                requires: {{provider_name: bench}}
"#,
        wd.jwks().display()
    );
    Ok(match name {
        "none" => String::new(),
        "ratelimit" => ratelimit.to_string(),
        "jwt" => jwt,
        "ratelimit_jwt" => format!("{ratelimit}{jwt}"),
        "waf" => {
            let crs =
                crs.ok_or("no OWASP Core Rule Set found (give its directory with HOIST_CRS_DIR)")?;
            // The shape operators use for Coraza on Envoy (envoy.filters.http.wasm), and
            // their directives: the recommended base configuration (request and response
            // bodies inspected), the CRS setup, the rules.
            let directives = serde_json::json!({
                "directives_map": {"crs": [
                    format!("Include {}", wd.waf_base_conf().display()),
                    format!("Include {}/crs-setup.conf.example", crs.display()),
                    format!("Include {}/rules/*.conf", crs.display()),
                    "SecRuleEngine On",
                ]},
                "default_directives": "crs",
            });
            format!(
                r#"          - name: envoy.filters.http.wasm
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: coraza-filter
                root_id: ""
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: {}
                vm_config:
                  runtime: envoy.wasm.runtime.v8
                  code: {{local: {{filename: coraza-waf.wasm}}}}
"#,
                serde_json::Value::String(directives.to_string())
            )
        }
        other => return Err(format!("unknown L7 configuration {other:?}")),
    })
}

/// Writes `configs/<l7>-<cipher>.yaml` and returns its path.
pub fn write(
    wd: &WorkDir,
    l7: &str,
    cipher: &str,
    sizes: &[String],
    crs: Option<&Path>,
) -> Result<PathBuf, String> {
    let filters = filters(l7, wd, crs)?;
    let mut routes = String::new();
    for size in sizes {
        routes.push_str(&format!(
            "              - match: {{path: /{size}}}\n                direct_response: {{status: 200, body: {{filename: {}}}}}\n",
            wd.payload(size).display()
        ));
    }
    let yaml = format!(
        r#"# hoist bench: L7 configuration "{l7}", cipher {cipher}. A stock Envoy bootstrap.
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
static_resources:
  listeners:
  - name: bench
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_params:
              tls_minimum_protocol_version: TLSv1_2
              tls_maximum_protocol_version: TLSv1_2
              cipher_suites: [{cipher}]
            tls_certificates:
            - certificate_chain: {{filename: {cert}}}
              private_key: {{filename: {key}}}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: bench
          codec_type: HTTP1
          route_config:
            max_direct_response_body_size_bytes: 10485760
            virtual_hosts:
            - name: bench
              domains: ["*"]
              routes:
{routes}          http_filters:
{filters}          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#,
        cert = wd.cert().display(),
        key = wd.key().display(),
    );
    let path = wd.config(&format!("{l7}-{cipher}"));
    std::fs::write(&path, yaml).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

/// Where the OWASP Core Rule Set is: $HOIST_CRS_DIR, or the project's shared copy.
pub fn crs_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("HOIST_CRS_DIR") {
        return Some(PathBuf::from(d));
    }
    ["../shared/crs", "../../shared/crs"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("rules").is_dir())
        .and_then(|p| p.canonicalize().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WAF configuration starts with the base configuration `prepare` writes, so request
    /// and response bodies are inspected as they are for operators who include Coraza's
    /// recommended configuration.
    #[test]
    fn waf_directives_start_with_the_base_configuration() {
        let wd = WorkDir {
            root: PathBuf::from("/work/dir"),
        };
        let yaml = filters("waf", &wd, Some(Path::new("/crs"))).unwrap();
        let base = yaml.find("Include /work/dir/waf/base.conf").expect(&yaml);
        let setup = yaml
            .find("Include /crs/crs-setup.conf.example")
            .expect(&yaml);
        let rules = yaml.find("Include /crs/rules/*.conf").expect(&yaml);
        assert!(base < setup && setup < rules, "{yaml}");
        assert!(filters("waf", &wd, None).is_err());
    }
}
