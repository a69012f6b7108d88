//! Load balancing within a cluster, per worker (Envoy's load balancers are per worker too):
//! weighted round robin (smooth, as nginx's: a weight-3 endpoint gets 3 of every 4 picks, not
//! in a burst), weighted random, and least request as power of two choices by active
//! requests.

use hoist_config::model::LbPolicy;

use super::ClusterInfo;

/// A worker's balancer state for one cluster.
pub struct LbState {
    /// Smooth weighted round robin's current weights.
    current: Vec<i64>,
}

impl LbState {
    pub fn new(cluster: &ClusterInfo) -> LbState {
        LbState {
            current: vec![0; cluster.endpoints.len()],
        }
    }

    /// The endpoint index for the next request. `active`: requests in flight per endpoint.
    pub fn pick(&mut self, cluster: &ClusterInfo, active: &[u32]) -> Option<usize> {
        let n = cluster.endpoints.len();
        if n <= 1 {
            return (n == 1).then_some(0);
        }
        match cluster.lb_policy {
            LbPolicy::RoundRobin => self.round_robin(cluster),
            LbPolicy::Random => weighted_random(cluster),
            LbPolicy::LeastRequest => {
                let a = weighted_random(cluster)?;
                let b = weighted_random(cluster)?;
                let load = |i: usize| active.get(i).copied().unwrap_or(0);
                Some(if load(b) < load(a) { b } else { a })
            }
        }
    }

    fn round_robin(&mut self, cluster: &ClusterInfo) -> Option<usize> {
        let mut total = 0i64;
        let mut best: Option<usize> = None;
        for (i, e) in cluster.endpoints.iter().enumerate() {
            let w = i64::from(e.weight);
            total += w;
            self.current[i] += w;
            if best.is_none_or(|b| self.current[i] > self.current[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.current[b] -= total;
        Some(b)
    }
}

fn weighted_random(cluster: &ClusterInfo) -> Option<usize> {
    let total: u64 = cluster.endpoints.iter().map(|e| u64::from(e.weight)).sum();
    if total == 0 {
        return None;
    }
    let mut r = crate::request_id::random_u64() % total;
    for (i, e) in cluster.endpoints.iter().enumerate() {
        let w = u64::from(e.weight);
        if r < w {
            return Some(i);
        }
        r -= w;
    }
    None
}

/// Picks one of `(item, weight)` in proportion to the weights (weighted_clusters).
pub fn pick_weighted<T>(items: &[(T, u32)]) -> Option<&T> {
    let total: u64 = items.iter().map(|(_, w)| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut r = crate::request_id::random_u64() % total;
    for (item, w) in items {
        let w = u64::from(*w);
        if r < w {
            return Some(item);
        }
        r -= w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::EndpointInfo;
    use std::time::Duration;

    fn cluster(policy: LbPolicy, weights: &[u32]) -> ClusterInfo {
        ClusterInfo {
            name: "c".into(),
            endpoints: weights
                .iter()
                .enumerate()
                .map(|(i, w)| EndpointInfo {
                    host: "127.0.0.1".into(),
                    port: 1000 + i as u16,
                    weight: *w,
                    label: String::new(),
                    stats: Default::default(),
                })
                .collect(),
            lb_policy: policy,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: None,
            max_requests_per_connection: None,
            limits: Default::default(),
            resources: Default::default(),
            resolve: false,
            family: Default::default(),
            tls: None,
        }
    }

    #[test]
    fn round_robin_follows_weights_smoothly() {
        let c = cluster(LbPolicy::RoundRobin, &[1, 3]);
        let mut lb = LbState::new(&c);
        let picks: Vec<usize> = (0..8).map(|_| lb.pick(&c, &[0, 0]).unwrap()).collect();
        assert_eq!(picks, vec![1, 0, 1, 1, 1, 0, 1, 1]);
    }

    #[test]
    fn random_and_least_request_cover_every_endpoint() {
        for policy in [LbPolicy::Random, LbPolicy::LeastRequest] {
            let c = cluster(policy, &[1, 1, 1]);
            let mut lb = LbState::new(&c);
            let mut seen = [0u32; 3];
            for _ in 0..3000 {
                seen[lb.pick(&c, &[0, 0, 0]).unwrap()] += 1;
            }
            assert!(seen.iter().all(|&n| n > 700), "{policy:?}: {seen:?}");
        }
        // Least request avoids the busy endpoint whenever it is one of the two choices.
        let c = cluster(LbPolicy::LeastRequest, &[1, 1]);
        let mut lb = LbState::new(&c);
        let busy = (0..1000)
            .filter(|_| lb.pick(&c, &[5, 0]) == Some(0))
            .count();
        assert!(busy < 400, "{busy}");
    }

    #[test]
    fn weighted_picks() {
        let items = [("a", 0), ("b", 1)];
        assert!((0..100).all(|_| pick_weighted(&items) == Some(&"b")));
        assert!(pick_weighted::<&str>(&[("a", 0)]).is_none());
    }
}
