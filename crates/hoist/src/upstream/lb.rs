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

    /// The endpoint index for the next request. `active`: requests in flight per endpoint;
    /// `hash`: the request's hash for RING_HASH and MAGLEV (None: a random host, as Envoy).
    pub fn pick(
        &mut self,
        cluster: &ClusterInfo,
        active: &[u32],
        hash: Option<u64>,
    ) -> Option<usize> {
        let n = cluster.endpoints.len();
        if n == 1 {
            return Some(0);
        }
        // Envoy's priority levels and panic threshold (50 %): a level with too few healthy
        // hosts has all of its hosts take traffic, rather than overloading the few left.
        let dice = hash.unwrap_or_else(crate::request_id::random_u64);
        let (level, panic) = super::priority::choose(cluster, dice);
        let usable = |i: usize| {
            cluster
                .endpoints
                .get(i)
                .is_some_and(|e| e.priority == level && (panic || e.available()))
        };
        match cluster.lb_policy {
            LbPolicy::RoundRobin => self.round_robin(cluster, &usable),
            LbPolicy::Random => weighted_random(cluster, &usable),
            LbPolicy::LeastRequest => {
                let a = weighted_random(cluster, &usable)?;
                let b = weighted_random(cluster, &usable)?;
                let load = |i: usize| active.get(i).copied().unwrap_or(0);
                Some(if load(b) < load(a) { b } else { a })
            }
            LbPolicy::RingHash { .. } | LbPolicy::Maglev { .. } => {
                let hash = hash.unwrap_or_else(crate::request_id::random_u64);
                cluster.hash_table.as_ref()?.pick(hash, &usable)
            }
        }
    }

    fn round_robin(
        &mut self,
        cluster: &ClusterInfo,
        usable: &dyn Fn(usize) -> bool,
    ) -> Option<usize> {
        let mut total = 0i64;
        let mut best: Option<usize> = None;
        for (i, e) in cluster.endpoints.iter().enumerate() {
            if !usable(i) {
                continue;
            }
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

fn weighted_random(cluster: &ClusterInfo, usable: &dyn Fn(usize) -> bool) -> Option<usize> {
    let weight = |i: usize, e: &super::EndpointInfo| {
        if usable(i) {
            u64::from(e.weight)
        } else {
            0
        }
    };
    let total: u64 = cluster
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| weight(i, e))
        .sum();
    if total == 0 {
        return None;
    }
    let mut r = crate::request_id::random_u64() % total;
    for (i, e) in cluster.endpoints.iter().enumerate() {
        let w = weight(i, e);
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
    use crate::upstream::testing::cluster;

    #[test]
    fn round_robin_follows_weights_smoothly() {
        let c = cluster(LbPolicy::RoundRobin, &[1, 3]);
        let mut lb = LbState::new(&c);
        let picks: Vec<usize> = (0..8)
            .map(|_| lb.pick(&c, &[0, 0], None).unwrap())
            .collect();
        assert_eq!(picks, vec![1, 0, 1, 1, 1, 0, 1, 1]);
    }

    #[test]
    fn random_and_least_request_cover_every_endpoint() {
        for policy in [LbPolicy::Random, LbPolicy::LeastRequest] {
            let c = cluster(policy, &[1, 1, 1]);
            let mut lb = LbState::new(&c);
            let mut seen = [0u32; 3];
            for _ in 0..3000 {
                seen[lb.pick(&c, &[0, 0, 0], None).unwrap()] += 1;
            }
            assert!(seen.iter().all(|&n| n > 700), "{policy:?}: {seen:?}");
        }
        // Least request avoids the busy endpoint whenever it is one of the two choices.
        let c = cluster(LbPolicy::LeastRequest, &[1, 1]);
        let mut lb = LbState::new(&c);
        let busy = (0..1000)
            .filter(|_| lb.pick(&c, &[5, 0], None) == Some(0))
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
