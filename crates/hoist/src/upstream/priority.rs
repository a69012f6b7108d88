//! Envoy's priority levels: traffic goes to priority 0 while it is healthy enough (its
//! healthy share x the overprovisioning factor, 1.4 by default, reaches 100 %), and the load
//! it cannot take spills to the next levels. A level is in panic (every host of it takes
//! traffic, healthy or not) when the levels together are short of 100 % and fewer than half
//! of its hosts are healthy; when every level is in panic, load follows the host counts.

use super::ClusterInfo;

/// Envoy's default healthy_panic_threshold (percent).
const PANIC_THRESHOLD: u64 = 50;

/// The level a request goes to and whether that level is in panic. `dice`: any number (the
/// request's hash for hashing balancers, else a random one); its remainder by 100 picks.
pub fn choose(cluster: &ClusterInfo, dice: u64) -> (u32, bool) {
    let levels = cluster.priorities as usize;
    let factor = u64::from(cluster.overprovisioning_factor);
    if levels <= 1 {
        // The common case, without allocating: one level, in panic or not.
        let t = cluster.endpoints.len() as u64;
        let h = cluster.endpoints.iter().filter(|e| e.available()).count() as u64;
        let health = (factor * h).checked_div(t).unwrap_or(0).min(100);
        return (0, health < 100 && (t == 0 || 100 * h / t < PANIC_THRESHOLD));
    }
    // (healthy hosts, hosts) per level.
    let mut counts = vec![(0u64, 0u64); levels.max(1)];
    for e in &cluster.endpoints {
        if let Some(c) = counts.get_mut(e.priority as usize) {
            c.1 += 1;
            if e.available() {
                c.0 += 1;
            }
        }
    }
    let health: Vec<u64> = counts
        .iter()
        .map(|&(h, t)| (factor * h).checked_div(t).unwrap_or(0).min(100))
        .collect();
    let total: u64 = health.iter().sum::<u64>().min(100);
    let panic: Vec<bool> = counts
        .iter()
        .map(|&(h, t)| total < 100 && (t == 0 || 100 * h / t < PANIC_THRESHOLD))
        .collect();
    let loads: Vec<u64> = if panic.iter().all(|p| *p) {
        // Total panic: in proportion to the hosts of each level.
        let hosts: u64 = counts.iter().map(|c| c.1).sum::<u64>().max(1);
        counts.iter().map(|c| 100 * c.1 / hosts).collect()
    } else {
        let mut left = 100u64;
        let mut loads: Vec<u64> = health
            .iter()
            .map(|h| {
                let l = (h * 100 / total.max(1)).min(left);
                left -= l;
                l
            })
            .collect();
        // Rounding leftovers go to the first level that has healthy hosts.
        if let Some(i) = health.iter().position(|h| *h > 0) {
            loads[i] += left;
        }
        loads
    };
    let mut r = dice % 100;
    for (i, l) in loads.iter().enumerate() {
        if r < *l {
            return (i as u32, panic[i]);
        }
        r -= l;
    }
    // Loads that sum below 100 (integer division in total panic): the first level.
    (0, panic.first().copied().unwrap_or(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::testing::cluster;
    use hoist_config::model::LbPolicy;
    use std::sync::atomic::Ordering;

    /// Two levels of `n` hosts each; `down[i]`: how many of level i are unhealthy.
    fn two_levels(n: usize, down: [usize; 2]) -> ClusterInfo {
        let mut c = cluster(LbPolicy::RoundRobin, &vec![1; 2 * n]);
        c.priorities = 2;
        for (i, e) in c.endpoints.iter_mut().enumerate() {
            e.priority = (i / n) as u32;
            let within = i % n;
            e.healthy
                .store(within >= down[e.priority as usize], Ordering::Relaxed);
        }
        c
    }

    /// How many of 100 dice each level gets, and whether level 0 / 1 were in panic.
    fn shares(c: &ClusterInfo) -> ([u32; 2], [bool; 2]) {
        let mut shares = [0; 2];
        let mut panic = [false; 2];
        for dice in 0..100 {
            let (p, in_panic) = choose(c, dice);
            shares[p as usize] += 1;
            panic[p as usize] |= in_panic;
        }
        (shares, panic)
    }

    #[test]
    fn healthy_enough_priority_zero_takes_everything() {
        assert_eq!(shares(&two_levels(10, [0, 0])), ([100, 0], [false, false]));
        // 8 of 10 healthy x 1.4 = 112 %: still all of it.
        assert_eq!(shares(&two_levels(10, [2, 0])), ([100, 0], [false, false]));
    }

    #[test]
    fn load_spills_to_priority_one() {
        // 5 of 10 healthy: 70 % stays, 30 % spills.
        assert_eq!(shares(&two_levels(10, [5, 0])), ([70, 30], [false, false]));
        // None healthy at 0: everything to 1.
        assert_eq!(shares(&two_levels(10, [10, 0])).0, [0, 100]);
    }

    #[test]
    fn panic_when_the_levels_together_fall_short() {
        // 2 + 2 of 10 healthy: 28 % + 28 % = 56 %, normalized to 50 / 50; both below half
        // healthy: both in panic, so load follows host counts.
        let (s, p) = shares(&two_levels(10, [8, 8]));
        assert_eq!(s, [50, 50]);
        assert_eq!(p, [true, true]);
        // 6 healthy at 0 (84 %), 2 at 1 (28 %): 100 % together, no panic anywhere.
        let (s, p) = shares(&two_levels(10, [4, 8]));
        assert_eq!(s, [84, 16]);
        assert_eq!(p, [false, false]);
    }
}
