//! Consistent hashing: Envoy's ring hash and Maglev tables, built once per cluster at load
//! from the endpoints' addresses and weights (so every worker places a key on the same host),
//! and looked up with the request's hash.
//!
//! Envoy rebuilds its ring over the healthy hosts when health changes; that also moves keys
//! between hosts that stayed (the ring's scale depends on the host count). hoist keeps one
//! table and, when the chosen host is unhealthy or ejected, walks on to the next entry whose
//! host is usable: only the keys of the host that left move, and the table is never rebuilt
//! on a worker's hot path.

use super::xxhash::xxh64;
use super::EndpointInfo;

pub enum HashTable {
    /// (point, endpoint index), sorted by point.
    Ring(Vec<(u64, u32)>),
    /// Endpoint index per slot.
    Maglev(Vec<u32>),
}

impl HashTable {
    /// Envoy's RingHashLoadBalancer::Ring: each host gets points in proportion to its
    /// weight, scaled so the lightest host has at least `min` / its share; at most `max` in all.
    pub fn ring(endpoints: &[EndpointInfo], min: u64, max: u64) -> HashTable {
        let total: f64 = endpoints.iter().map(|e| f64::from(e.weight)).sum();
        let mut ring = Vec::new();
        if total <= 0.0 {
            return HashTable::Ring(ring);
        }
        let min_share = endpoints
            .iter()
            .map(|e| f64::from(e.weight) / total)
            .fold(1.0f64, f64::min);
        let scale = ((min_share * min as f64).ceil() / min_share).min(max as f64);
        let (mut current, mut target) = (0.0f64, 0.0f64);
        for (i, e) in endpoints.iter().enumerate() {
            target += scale * f64::from(e.weight) / total;
            let mut n = 0u64;
            while current < target {
                let key = format!("{}_{n}", e.label);
                ring.push((xxh64(key.as_bytes(), 0), i as u32));
                n += 1;
                current += 1.0;
            }
        }
        ring.sort_unstable();
        HashTable::Ring(ring)
    }

    /// Envoy's weighted Maglev table: hosts take turns filling their preferred slots (a
    /// permutation from two hashes of the address), a host of half the heaviest weight every
    /// other turn.
    pub fn maglev(endpoints: &[EndpointInfo], size: u64) -> HashTable {
        let size = size.max(1);
        let mut table: Vec<Option<u32>> = vec![None; size as usize];
        let max_weight = endpoints.iter().map(|e| e.weight).max().unwrap_or(0);
        if max_weight == 0 {
            return HashTable::Maglev(Vec::new());
        }
        struct Entry {
            offset: u64,
            skip: u64,
            weight: f64,
            target: f64,
            next: u64,
        }
        let mut entries: Vec<Entry> = endpoints
            .iter()
            .map(|e| Entry {
                offset: xxh64(e.label.as_bytes(), 0) % size,
                skip: if size > 1 {
                    xxh64(e.label.as_bytes(), 1) % (size - 1) + 1
                } else {
                    1
                },
                weight: f64::from(e.weight) / f64::from(max_weight),
                target: 0.0,
                next: 0,
            })
            .collect();
        let mut filled = 0u64;
        let mut iteration = 1u64;
        while filled < size {
            for (i, entry) in entries.iter_mut().enumerate() {
                if filled >= size {
                    break;
                }
                if (iteration as f64) * entry.weight < entry.target {
                    continue;
                }
                entry.target += 1.0;
                // The table is not full, so a free slot is found within `size` steps (the
                // skip is coprime with the prime size).
                for _ in 0..size {
                    let c = (entry.offset + entry.skip.wrapping_mul(entry.next) % size) % size;
                    entry.next += 1;
                    if let Some(slot @ None) = table.get_mut(c as usize) {
                        *slot = Some(i as u32);
                        filled += 1;
                        break;
                    }
                }
            }
            iteration += 1;
        }
        HashTable::Maglev(table.into_iter().map(|s| s.unwrap_or(0)).collect())
    }

    /// The endpoint for `hash`: its place in the table, or the next usable one after it.
    pub fn pick(&self, hash: u64, usable: &dyn Fn(usize) -> bool) -> Option<usize> {
        match self {
            HashTable::Ring(ring) => {
                let start = ring.partition_point(|(p, _)| *p < hash);
                let n = ring.len();
                (0..n)
                    .map(|k| ring[(start + k) % n].1 as usize)
                    .find(|&i| usable(i))
            }
            HashTable::Maglev(table) => {
                let n = table.len();
                if n == 0 {
                    return None;
                }
                let start = (hash % n as u64) as usize;
                (0..n)
                    .map(|k| table[(start + k) % n] as usize)
                    .find(|&i| usable(i))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::testing::cluster;
    use hoist_config::model::LbPolicy;

    fn tables(weights: &[u32]) -> Vec<HashTable> {
        let c = cluster(LbPolicy::RoundRobin, weights);
        vec![
            HashTable::ring(&c.endpoints, 1024, 8 << 20),
            HashTable::maglev(&c.endpoints, 65537),
        ]
    }

    fn keys() -> impl Iterator<Item = u64> {
        (0..20_000u64).map(|k| xxh64(format!("user-{k}").as_bytes(), 0))
    }

    #[test]
    fn keys_spread_by_weight() {
        for t in tables(&[1, 2, 1]) {
            let mut seen = [0u32; 3];
            for h in keys() {
                seen[t.pick(h, &|_| true).unwrap()] += 1;
            }
            // Expected 5000 / 10000 / 5000; loose bounds (a ring of 1024+ points is within a
            // few percent).
            assert!((3500..6500).contains(&seen[0]), "{seen:?}");
            assert!((8000..12000).contains(&seen[1]), "{seen:?}");
            assert!((3500..6500).contains(&seen[2]), "{seen:?}");
        }
    }

    #[test]
    fn removing_a_host_moves_only_its_keys() {
        for t in tables(&[1, 1, 1, 1]) {
            let mut moved = 0;
            for h in keys() {
                let before = t.pick(h, &|_| true).unwrap();
                let after = t.pick(h, &|i| i != 2).unwrap();
                if before == 2 {
                    assert_ne!(after, 2);
                    moved += 1;
                } else {
                    assert_eq!(before, after, "a key of a staying host moved");
                }
            }
            assert!(moved > 3000, "{moved}");
        }
    }

    #[test]
    fn maglev_fills_its_table_and_nothing_usable_is_none() {
        let c = cluster(LbPolicy::RoundRobin, &[3, 1]);
        let HashTable::Maglev(table) = HashTable::maglev(&c.endpoints, 251) else {
            unreachable!()
        };
        let heavy = table.iter().filter(|&&i| i == 0).count();
        assert_eq!(table.len(), 251);
        assert!((170..210).contains(&heavy), "{heavy}");
        for t in tables(&[1, 1]) {
            assert_eq!(t.pick(42, &|_| false), None);
        }
    }
}
