//! Retry budgets (circuit_breakers.thresholds[].retry_budget): retries allowed as a share of
//! the cluster's active requests, at least min_retry_concurrency; the rest overflow.
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use support::TempDir;
use upstream_support::client::{get, start};
use upstream_support::{cluster, route, Origin};

fn budget(percent: &str, min: u32) -> String {
    format!(
        "    circuit_breakers: {{thresholds: [{{max_retries: 0, retry_budget: {{budget_percent: {{value: {percent}}}, min_retry_concurrency: {min}}}}}]}}\n"
    )
}

#[test]
fn retry_budget_replaces_max_retries() {
    let dir = TempDir::new("up-budget");
    let a = Origin::start("a");
    // One request in flight: 100 % of it allows one active retry, 50 % none (min 0).
    let clusters = cluster("full", &[(a.port, 1)], &budget("100", 0))
        + &cluster("half", &[(a.port, 1)], &budget("50", 0))
        + &cluster("floor", &[(a.port, 1)], &budget("0", 1))
        + &cluster(
            "defaults",
            &[(a.port, 1)],
            "    circuit_breakers: {thresholds: [{max_retries: 0, retry_budget: {}}]}\n",
        );
    let retry =
        "retry_policy: {retry_on: 5xx, num_retries: 2, retry_back_off: {base_interval: 0.001s}}";
    let routes = ["full", "half", "floor", "defaults"]
        .iter()
        .map(|c| {
            route(
                &format!("{{prefix: /{c}/}}"),
                &format!("{{cluster: {c}, prefix_rewrite: /, {retry}}}"),
            )
        })
        .collect::<String>();
    let h = start(&dir, &routes, &clusters);
    for c in ["full", "half", "floor", "defaults"] {
        assert_eq!(get(&h, &format!("/{c}/status?code=503"), &[]).0, 503);
    }
    // max_retries: 0 would forbid every retry; the budget decides instead.
    assert_eq!(h.stat("cluster.full.upstream_rq_retry"), 2);
    assert_eq!(h.stat("cluster.full.upstream_rq_retry_overflow"), 0);
    assert_eq!(h.stat("cluster.half.upstream_rq_retry"), 0);
    assert_eq!(h.stat("cluster.half.upstream_rq_retry_overflow"), 1);
    assert_eq!(h.stat("cluster.half.upstream_rq_total"), 1);
    // min_retry_concurrency: 1 lets the retries through one at a time.
    assert_eq!(h.stat("cluster.floor.upstream_rq_retry"), 2);
    // Envoy's defaults (20 %, at least 3).
    assert_eq!(h.stat("cluster.defaults.upstream_rq_retry"), 2);
}
