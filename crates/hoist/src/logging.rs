//! Process logs (tracing to stderr) with a level that POST /logging can change at run time.

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

static HANDLE: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();
static LEVEL: OnceLock<std::sync::Mutex<String>> = OnceLock::new();

pub fn init(level: &str) {
    let filter = EnvFilter::new(level);
    let (layer, handle) = reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_thread_names(true);
    if tracing_subscriber::registry()
        .with(layer)
        .with(fmt)
        .try_init()
        .is_ok()
    {
        let _ = HANDLE.set(handle);
        let _ = LEVEL.set(std::sync::Mutex::new(level.to_string()));
    }
}

/// The active level, as /logging reports it.
pub fn level() -> String {
    LEVEL
        .get()
        .and_then(|l| l.lock().ok().map(|l| l.clone()))
        .unwrap_or_else(|| "info".to_string())
}

/// Envoy's level names (trace, debug, info, warning, error, critical, off).
pub fn set_level(name: &str) -> Result<(), String> {
    let level = match name {
        "trace" | "debug" | "info" | "error" | "off" => name,
        "warning" | "warn" => "warn",
        "critical" => "error",
        other => return Err(format!("unknown level \"{other}\"")),
    };
    let handle = HANDLE.get().ok_or("logging is not initialised")?;
    handle
        .reload(EnvFilter::new(level))
        .map_err(|e| e.to_string())?;
    if let Some(l) = LEVEL.get() {
        if let Ok(mut l) = l.lock() {
            *l = name.to_string();
        }
    }
    Ok(())
}
