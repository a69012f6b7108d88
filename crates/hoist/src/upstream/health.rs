//! Active health checking (Envoy's `health_checks`, HTTP or TCP): one thread of its own runs a
//! checker per endpoint; a host becomes unhealthy after `unhealthy_threshold` failures in a
//! row and healthy again after `healthy_threshold` successes (its first success suffices, as in
//! Envoy). The load balancers read the verdict from an atomic flag.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use hoist_config::model::HealthCheck;
use hoist_http::h1::{RequestFraming, UpstreamH1};
use hoist_stats::{Counter, Gauge, ImportMode};
use http::header::{HeaderMap, HeaderValue};

use super::conn::connect;
use super::{ClusterInfo, ClusterManager};

struct Stats {
    attempt: Counter,
    success: Counter,
    failure: Counter,
    network_failure: Counter,
    membership_healthy: Gauge,
    slot: usize,
}

/// Starts the checkers when a cluster has health checks; they live as long as the process.
pub fn spawn(manager: &Arc<ClusterManager>) {
    let Some(store) = manager.store().cloned() else {
        return;
    };
    let checked: Vec<Arc<ClusterInfo>> = manager
        .clusters
        .iter()
        .filter(|c| c.health_check.is_some())
        .cloned()
        .collect();
    if checked.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("hoist-health".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("health checks cannot start their runtime: {e}");
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                for cluster in checked {
                    let scope = format!("cluster.{}.", cluster.name);
                    let stats = Arc::new(Stats {
                        attempt: store.counter(&format!("{scope}health_check.attempt")),
                        success: store.counter(&format!("{scope}health_check.success")),
                        failure: store.counter(&format!("{scope}health_check.failure")),
                        network_failure: store
                            .counter(&format!("{scope}health_check.network_failure")),
                        membership_healthy: store.gauge(
                            &format!("{scope}membership_healthy"),
                            ImportMode::NeverImport,
                        ),
                        slot: store.main_slot(),
                    });
                    stats
                        .membership_healthy
                        .set(stats.slot, healthy_count(&cluster));
                    for endpoint in 0..cluster.endpoints.len() {
                        tokio::task::spawn_local(check_loop(
                            cluster.clone(),
                            endpoint,
                            stats.clone(),
                        ));
                    }
                }
                std::future::pending::<()>().await;
            });
        });
    if let Err(e) = spawned {
        tracing::error!("health checks cannot start: {e}");
    }
}

fn healthy_count(c: &ClusterInfo) -> u64 {
    c.available_count()
}

async fn check_loop(cluster: Arc<ClusterInfo>, endpoint: usize, stats: Arc<Stats>) {
    let Some(hc) = cluster.health_check.clone() else {
        return;
    };
    let (mut successes, mut failures) = (0u32, 0u32);
    let mut first = true;
    loop {
        stats.attempt.inc(stats.slot);
        let result = tokio::time::timeout(hc.timeout, check(&cluster, endpoint, &hc)).await;
        let Some(e) = cluster.endpoints.get(endpoint) else {
            return;
        };
        let ok = match result {
            Ok(Ok(())) => true,
            Ok(Err(Verdict::Network)) | Err(_) => {
                stats.network_failure.inc(stats.slot);
                false
            }
            Ok(Err(Verdict::Unhealthy)) => false,
        };
        if ok {
            if let Some(d) = &cluster.outlier {
                d.health_check_passed(&cluster, endpoint);
            }
            stats.success.inc(stats.slot);
            successes += 1;
            failures = 0;
            if !e.healthy.load(Ordering::Relaxed) && (first || successes >= hc.healthy_threshold) {
                e.healthy.store(true, Ordering::Relaxed);
                tracing::info!("cluster {}: {} is healthy", cluster.name, e.label);
            }
        } else {
            stats.failure.inc(stats.slot);
            failures += 1;
            successes = 0;
            if e.healthy.load(Ordering::Relaxed) && failures >= hc.unhealthy_threshold {
                e.healthy.store(false, Ordering::Relaxed);
                tracing::warn!("cluster {}: {} is unhealthy", cluster.name, e.label);
            }
        }
        first = false;
        stats
            .membership_healthy
            .set(stats.slot, healthy_count(&cluster));
        tokio::time::sleep(hc.interval).await;
    }
}

enum Verdict {
    /// No connection, or it broke.
    Network,
    /// An answer with an unexpected status.
    Unhealthy,
}

async fn check(cluster: &ClusterInfo, endpoint: usize, hc: &HealthCheck) -> Result<(), Verdict> {
    let e = cluster.endpoints.get(endpoint).ok_or(Verdict::Network)?;
    let stream = connect(cluster, e).await.map_err(|_| Verdict::Network)?;
    let Some(http) = &hc.http else {
        return Ok(());
    };
    let mut h1 = UpstreamH1::new(stream);
    let mut headers = HeaderMap::new();
    let host = http.host.as_deref().unwrap_or(&cluster.name);
    headers.insert(
        http::header::HOST,
        HeaderValue::from_str(host).map_err(|_| Verdict::Unhealthy)?,
    );
    headers.insert(
        http::header::USER_AGENT,
        HeaderValue::from_static("Envoy/HC"),
    );
    headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    h1.send_head("GET", &http.path, &headers, RequestFraming::None)
        .await
        .map_err(|_| Verdict::Network)?;
    let (response, _) = h1.read_head(false).await.map_err(|_| Verdict::Network)?;
    let expected = http
        .expected_statuses
        .iter()
        .any(|(start, end)| (*start..*end).contains(&response.status));
    if expected {
        Ok(())
    } else {
        Err(Verdict::Unhealthy)
    }
}
