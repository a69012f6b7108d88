//! The filter driven in memory: configurations decoded as at load, requests through
//! `decode_headers`, tokens signed in the tests by aws-lc-rs directly.

mod config_errors;
mod keys;
mod requirements;
mod verification;

use std::net::SocketAddr;
use std::sync::Arc;

use hoist_config::model::RawTypedConfig;
use hoist_http::{RequestHead, Version};
use hoist_stats::Store;
use serde_json::{json, Map, Value};

use super::{Config, RouteConfig, Worker, TYPE_NAME};
use crate::chain::BuildContext;
use crate::filter::{FilterStatus, HttpFilter, LocalReply, StreamContext, StreamInfo, StreamState};

pub const ISSUER: &str = "https://idp.example.com";

pub fn raw(value: Value, type_name: &str) -> RawTypedConfig {
    RawTypedConfig {
        type_url: format!("type.googleapis.com/{type_name}"),
        value,
        yaml_path: "jwt".into(),
    }
}

pub fn try_config(value: Value) -> Result<(Arc<Store>, Config), String> {
    let store = Store::new(1);
    let cx = BuildContext {
        stat_prefix: "t",
        stats: &store,
        workers: 1,
        clusters: &[],
    };
    let c = Config::decode(&raw(value, TYPE_NAME), &cx).map_err(|e| e.to_string())?;
    Ok((store, c))
}

/// One provider "p" (issuer ISSUER, all test keys) plus `extra` provider fields, required on
/// every path.
pub fn provider_config(extra: Value) -> Value {
    let mut p =
        json!({"issuer": ISSUER, "local_jwks": {"inline_string": keys::jwks().to_string()}});
    if let (Some(p), Value::Object(e)) = (p.as_object_mut(), extra) {
        p.extend(e);
    }
    json!({"providers": {"p": p}, "rules": [{"match": {"prefix": "/"}, "requires": {"provider_name": "p"}}]})
}

pub struct Harness {
    pub store: Arc<Store>,
    pub config: Arc<Config>,
    pub worker: Worker,
}

pub struct Outcome {
    /// None: the request goes on.
    pub reply: Option<LocalReply>,
    pub head: RequestHead,
    pub metadata: Map<String, Value>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.reply.is_none()
    }

    /// The body of the rejection ("" when the request passed).
    pub fn body(&self) -> String {
        self.reply
            .as_ref()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .unwrap_or_default()
    }

    pub fn code(&self) -> u16 {
        self.reply.as_ref().map_or(200, |r| r.status)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.head
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

impl Harness {
    pub fn new(value: Value) -> Harness {
        let (store, config) = try_config(value).unwrap();
        let config = Arc::new(config);
        let worker = Worker::new(config.clone(), 0);
        Harness {
            store,
            config,
            worker,
        }
    }

    pub fn stat(&self, name: &str) -> u64 {
        self.store
            .counter(&format!("http.t.jwt_authn.{name}"))
            .value()
    }

    pub fn route_config(&self, value: Value) -> Result<RouteConfig, String> {
        RouteConfig::decode(
            &raw(
                value,
                "envoy.extensions.filters.http.jwt_authn.v3.PerRouteConfig",
            ),
            &self.config,
        )
        .map_err(|e| e.to_string())
    }

    pub fn run(&self, head: RequestHead) -> Outcome {
        self.run_with(head, None)
    }

    pub fn run_with(&self, mut head: RequestHead, route: Option<RouteConfig>) -> Outcome {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let info = StreamInfo {
            downstream_remote: addr,
            downstream_local: addr,
            tls: None,
            connection_id: 1,
            route_name: None,
            has_route: true,
            virtual_host_rate_limits: &[],
        };
        let route: Option<Arc<dyn std::any::Any + Send + Sync>> =
            route.map(|r| Arc::new(r) as Arc<dyn std::any::Any + Send + Sync>);
        let mut state = StreamState::default();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let status = rt.block_on(async {
            let mut cx = StreamContext {
                info: &info,
                state: &mut state,
                route_config: route.as_ref(),
            };
            self.worker
                .stream()
                .decode_headers(&mut head, true, &mut cx)
                .await
        });
        let reply = match status {
            FilterStatus::Continue => None,
            FilterStatus::Reply(r) => Some(r),
            FilterStatus::StopAndBuffer => panic!("jwt_authn never buffers"),
        };
        let metadata = match state.metadata.remove(super::METADATA_NAMESPACE) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        Outcome {
            reply,
            head,
            metadata,
        }
    }
}

pub fn request(path: &str, headers: &[(&str, &str)]) -> RequestHead {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        map.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    RequestHead {
        method: http::Method::GET,
        path: path.into(),
        version: Version::Http11,
        authority: Some("api.example.com".into()),
        headers: map,
    }
}

pub fn bearer(token: &str) -> RequestHead {
    request("/data", &[("authorization", &format!("Bearer {token}"))])
}

pub fn now() -> u64 {
    super::unix_now()
}

/// Claims for ISSUER valid for an hour.
pub fn claims() -> Value {
    json!({"iss": ISSUER, "sub": "user-1", "exp": now() + 3600, "iat": now()})
}
