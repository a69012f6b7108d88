//! One request's verification (Envoy's Verifier and Authenticator): a requirement tree is
//! evaluated over the tokens the request carries, and every good token has its effects
//! (forwarded payload, claim headers, token removal, metadata).
//!
//! Group requirements are evaluated child by child, in order: `requires_all` stops at the
//! first failure, `requires_any` at the first success. Envoy starts all children at once and
//! takes the first outcome that decides; the result is the same, only a child still waiting
//! for a remote JWKS may leave no effects here where it might have in Envoy.

use std::rc::Rc;

use hoist_http::RequestHead;
use http::HeaderValue;
use serde_json::{Map, Value};

use super::config::{Provider, Requirement};
use super::extract::Token;
use super::jwt::{audiences_allowed, Jwt, MAX_TOKEN_BYTES};
use super::status::Status;
use super::verify::verify_signature;
use super::Worker;

/// Which provider a token is checked against.
#[derive(Clone, Copy)]
enum Mode<'r> {
    /// `provider_name` / `provider_and_audiences`: its locations, its keys, its cache.
    Provider {
        index: usize,
        audiences: Option<&'r [String]>,
    },
    /// allow_missing[_or_failed]: all providers' locations; the provider is found by the
    /// token's issuer; nothing is cached.
    AnyIssuer { allow_failed: bool },
}

pub struct Run<'a> {
    pub worker: &'a Worker,
    pub head: &'a mut RequestHead,
    /// Unix seconds, for exp and nbf.
    pub now: u64,
    /// What good tokens put in the `envoy.filters.http.jwt_authn` metadata namespace.
    pub extracted: Map<String, Value>,
}

impl<'a> Run<'a> {
    pub async fn eval(&mut self, r: &'a Requirement) -> Status {
        match r {
            Requirement::Provider {
                provider,
                audiences,
            } => {
                self.authenticate(Mode::Provider {
                    index: *provider,
                    audiences: audiences.as_deref(),
                })
                .await
            }
            Requirement::AllowMissingOrFailed => {
                self.authenticate(Mode::AnyIssuer { allow_failed: true })
                    .await
            }
            Requirement::AllowMissing => {
                self.authenticate(Mode::AnyIssuer {
                    allow_failed: false,
                })
                .await
            }
            Requirement::AllowAll => Status::Ok,
            Requirement::All(children) => {
                for child in children {
                    let s = Box::pin(self.eval(child)).await;
                    if s != Status::Ok {
                        return s;
                    }
                }
                Status::Ok
            }
            Requirement::Any {
                children,
                allow_missing_or_failed,
                allow_missing,
            } => {
                // Envoy's aggregation: prefer a real error over JwtUnknownIssuer, and that
                // over JwtMissed; the last one of a kind wins.
                let mut outcome = Status::JwtMissed;
                for child in children {
                    let s = Box::pin(self.eval(child)).await;
                    if s == Status::Ok {
                        return s;
                    }
                    if (s != Status::JwtMissed && s != Status::JwtUnknownIssuer)
                        || outcome == Status::JwtMissed
                    {
                        outcome = s;
                    }
                }
                if *allow_missing_or_failed || (*allow_missing && outcome == Status::JwtMissed) {
                    Status::Ok
                } else {
                    outcome
                }
            }
        }
    }

    /// Every token in the locations of `mode` must verify (Envoy's rule against smuggling a
    /// bad token next to a good one), unless failures are allowed.
    async fn authenticate(&mut self, mode: Mode<'a>) -> Status {
        let worker: &'a Worker = self.worker;
        let config = &*worker.config;
        let extractor = match mode {
            Mode::Provider { index, .. } => &config.extractors[index],
            Mode::AnyIssuer { .. } => &config.all_providers,
        };
        extractor.sanitize(self.head);
        let tokens = extractor.extract(self.head);
        let (allow_failed, allow_missing) = match mode {
            Mode::Provider { .. } => (false, false),
            Mode::AnyIssuer { allow_failed } => (allow_failed, true),
        };
        let mut last = Status::JwtMissed;
        // Envoy takes them from the back of its list.
        for token in tokens.iter().rev() {
            last = self.verify_token(token, mode).await;
            if last != Status::Ok && !allow_failed && !allow_missing {
                return last;
            }
        }
        if allow_failed || (allow_missing && last == Status::JwtMissed) {
            Status::Ok
        } else {
            last
        }
    }

    async fn verify_token(&mut self, token: &Token<'_>, mode: Mode<'a>) -> Status {
        let worker = self.worker;
        let config = &*worker.config;
        let mut cached = None;
        if let Mode::Provider { index, .. } = mode {
            cached = worker.providers[index]
                .cache
                .borrow_mut()
                .lookup(&token.text, self.now);
            if cached.is_some() {
                worker.stats.jwt_cache_hit.inc();
            } else {
                worker.stats.jwt_cache_miss.inc();
            }
        }
        let cache_hit = cached.is_some();
        let jwt = match cached {
            Some(j) => j,
            None if token.text.len() > MAX_TOKEN_BYTES => return Status::JwtVerificationFail,
            None => match Jwt::parse(&token.text) {
                Ok(j) => Rc::new(j),
                Err(s) => return s,
            },
        };
        if !token.issuers.allows(&jwt.iss) {
            return Status::JwtUnknownIssuer;
        }
        let index = match mode {
            Mode::Provider { index, .. } => index,
            Mode::AnyIssuer { .. } => match config.settings.provider_by_issuer(&jwt.iss) {
                Some(i) => i,
                None => return Status::JwtUnknownIssuer,
            },
        };
        let provider = &config.settings.providers[index];
        let time = jwt.verify_time(self.now, provider.clock_skew);
        if time != Status::Ok {
            return time;
        }
        let audiences = match mode {
            Mode::Provider {
                audiences: Some(a), ..
            } => a,
            _ => provider.audiences.as_slice(),
        };
        if !audiences_allowed(audiences, &jwt.audiences) {
            return Status::JwtAudienceNotAllowed;
        }
        if !cache_hit {
            let keys = match worker.keys(index).await {
                Ok(k) => k,
                Err(s) => return s,
            };
            let s = verify_signature(&jwt, &keys);
            if s != Status::Ok {
                return s;
            }
        }
        self.good_jwt(&jwt, provider, token);
        if !cache_hit && matches!(mode, Mode::Provider { .. }) {
            worker.providers[index]
                .cache
                .borrow_mut()
                .insert(&token.text, jwt);
        }
        Status::Ok
    }

    /// What a verified token does to the request (Envoy's handleGoodJwt).
    fn good_jwt(&mut self, jwt: &Jwt, p: &Provider, token: &Token<'_>) {
        if let Some(h) = &p.forward_payload_header {
            let mut payload = jwt.payload_b64().to_owned();
            if p.pad_forward_payload_header {
                while !payload.len().is_multiple_of(4) {
                    payload.push('=');
                }
            }
            if let Ok(v) = HeaderValue::from_str(&payload) {
                self.head.headers.append(h.clone(), v);
            }
        }
        for (header, claim) in &p.claim_to_headers {
            let Some(text) = claim_text(&jwt.payload, claim) else {
                continue;
            };
            if let Ok(v) = HeaderValue::from_str(&text) {
                self.head.headers.append(header.clone(), v);
            }
        }
        if !p.forward {
            // Only header locations: Envoy leaves parameters and cookies in place.
            if let Some(h) = token.header {
                self.head.headers.remove(h);
            }
        }
        if let Some(name) = &p.header_in_metadata {
            self.extracted
                .insert(name.clone(), Value::Object(jwt.header.clone()));
        }
        if let Some(name) = &p.payload_in_metadata {
            self.extracted
                .insert(name.clone(), Value::Object(jwt.payload.clone()));
        }
    }
}

/// A claim as a header value: strings as they are, numbers as integers when whole (else with
/// six decimals, like C++'s std::to_string), booleans as true/false. A dotted name reaches into
/// nested objects. Other types, and empty strings, give nothing.
fn claim_text(payload: &Map<String, Value>, claim: &str) -> Option<String> {
    let mut parts = claim.split('.');
    let mut value = payload.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => u.to_string(),
            (None, Some(f)) if f >= 0.0 && f < u64::MAX as f64 && f.fract() == 0.0 => {
                (f as u64).to_string()
            }
            (None, Some(f)) => format!("{f:.6}"),
            (None, None) => return None,
        },
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claims_as_header_text() {
        let Value::Object(p) = json!({"sub": "u1", "n": 42, "f": 1.5, "neg": -2, "b": true,
            "o": {"inner": {"x": "deep"}}, "l": [1], "e": ""})
        else {
            unreachable!()
        };
        assert_eq!(claim_text(&p, "sub").as_deref(), Some("u1"));
        assert_eq!(claim_text(&p, "n").as_deref(), Some("42"));
        assert_eq!(claim_text(&p, "f").as_deref(), Some("1.500000"));
        assert_eq!(claim_text(&p, "neg").as_deref(), Some("-2.000000"));
        assert_eq!(claim_text(&p, "b").as_deref(), Some("true"));
        assert_eq!(claim_text(&p, "o.inner.x").as_deref(), Some("deep"));
        assert_eq!(claim_text(&p, "l"), None);
        assert_eq!(claim_text(&p, "e"), None);
        assert_eq!(claim_text(&p, "missing"), None);
    }
}
