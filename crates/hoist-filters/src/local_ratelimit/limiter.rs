//! A local rate limiter: the default token bucket and one bucket per configured descriptor,
//! with Envoy's rule for a request that matches some of them.

use std::time::Duration;

use super::token_bucket::{TokenBucket, TokenBucketSpec};

/// A `descriptors[]` entry: the exact list of (key, value) a request descriptor must have.
#[derive(Debug, PartialEq, Eq)]
pub struct DescriptorSpec {
    pub entries: Vec<(String, String)>,
    pub bucket: TokenBucketSpec,
}

/// What a limiter is made of, shared by the limiter of every connection when buckets are per
/// connection.
#[derive(Debug)]
pub struct LimiterSpec {
    pub default: TokenBucketSpec,
    /// Sorted by fill rate, slowest first: matched descriptors are consumed in this order.
    pub descriptors: Vec<DescriptorSpec>,
    /// `always_consume_default_token_bucket` (default true): with false, a request that
    /// matches a descriptor does not take from the default bucket.
    pub always_consume_default: bool,
}

impl LimiterSpec {
    /// Sorts `descriptors` into consumption order (stable: ties keep configuration order).
    pub fn new(
        default: TokenBucketSpec,
        mut descriptors: Vec<DescriptorSpec>,
        always_consume_default: bool,
    ) -> LimiterSpec {
        descriptors.sort_by(|a, b| a.bucket.fill_rate().total_cmp(&b.bucket.fill_rate()));
        LimiterSpec {
            default,
            descriptors,
            always_consume_default,
        }
    }
}

/// Which bucket decided a request (its numbers go into the x-ratelimit headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketId {
    Default,
    Descriptor(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub allowed: bool,
    pub bucket: BucketId,
}

pub struct Limiter {
    default: TokenBucket,
    descriptors: Box<[TokenBucket]>,
    always_consume_default: bool,
}

impl Limiter {
    /// Full buckets whose fills are counted from `now`.
    pub fn new(spec: &LimiterSpec, now: Duration) -> Limiter {
        Limiter {
            default: TokenBucket::new(spec.default, now),
            descriptors: spec
                .descriptors
                .iter()
                .map(|d| TokenBucket::new(d.bucket, now))
                .collect(),
            always_consume_default: spec.always_consume_default,
        }
    }

    /// Envoy's decision. `matched` lists the descriptors the request's descriptors equal, as
    /// indices into the spec's (sorted) descriptors, ascending; an index may repeat when two
    /// request descriptors are the same, and then takes two tokens, as in Envoy. The first
    /// descriptor without a token refuses the request (those before it keep their loss); then
    /// the default bucket decides, unless a descriptor matched and `always_consume_default` is
    /// off.
    pub fn request_allowed(&self, matched: &[usize], now: Duration) -> Outcome {
        let mut first = None;
        for &i in matched {
            let Some(bucket) = self.descriptors.get(i) else {
                continue;
            };
            if !bucket.consume(now) {
                return Outcome {
                    allowed: false,
                    bucket: BucketId::Descriptor(i),
                };
            }
            first.get_or_insert(i);
        }
        let use_default = first.is_none() || self.always_consume_default;
        if use_default && !self.default.consume(now) {
            return Outcome {
                allowed: false,
                bucket: BucketId::Default,
            };
        }
        Outcome {
            allowed: true,
            // A matched descriptor's bucket describes the request better than the default's.
            bucket: first.map_or(BucketId::Default, BucketId::Descriptor),
        }
    }

    pub fn bucket(&self, id: BucketId) -> &TokenBucket {
        match id {
            BucketId::Default => &self.default,
            BucketId::Descriptor(i) => self.descriptors.get(i).unwrap_or(&self.default),
        }
    }

    /// Every bucket is full: the limiter is indistinguishable from a new one.
    pub fn is_full(&self, now: Duration) -> bool {
        self.default.is_full(now) && self.descriptors.iter().all(|b| b.is_full(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(max: u32, per_fill: u32, interval_s: u64) -> TokenBucketSpec {
        TokenBucketSpec {
            max_tokens: max,
            tokens_per_fill: per_fill,
            fill_interval: Duration::from_secs(interval_s),
        }
    }

    fn descriptor(key: &str, value: &str, b: TokenBucketSpec) -> DescriptorSpec {
        DescriptorSpec {
            entries: vec![(key.to_owned(), value.to_owned())],
            bucket: b,
        }
    }

    const T: Duration = Duration::ZERO;

    #[test]
    fn descriptors_are_sorted_slowest_first() {
        let spec = LimiterSpec::new(
            bucket(100, 100, 1),
            vec![
                descriptor("a", "fast", bucket(10, 10, 1)),
                descriptor("b", "slow", bucket(10, 1, 60)),
            ],
            true,
        );
        assert_eq!(spec.descriptors[0].entries[0].1, "slow");
        assert_eq!(spec.descriptors[1].entries[0].1, "fast");
    }

    #[test]
    fn no_match_uses_the_default_bucket() {
        let spec = LimiterSpec::new(bucket(2, 1, 60), vec![], true);
        let l = Limiter::new(&spec, T);
        let allowed = |o: Outcome| (o.allowed, o.bucket);
        assert_eq!(
            allowed(l.request_allowed(&[], T)),
            (true, BucketId::Default)
        );
        assert_eq!(
            allowed(l.request_allowed(&[], T)),
            (true, BucketId::Default)
        );
        assert_eq!(
            allowed(l.request_allowed(&[], T)),
            (false, BucketId::Default)
        );
    }

    #[test]
    fn a_matched_descriptor_and_the_default_bucket_are_both_consumed() {
        let spec = LimiterSpec::new(
            bucket(3, 1, 60),
            vec![descriptor("k", "v", bucket(10, 1, 60))],
            true,
        );
        let l = Limiter::new(&spec, T);
        for _ in 0..3 {
            let o = l.request_allowed(&[0], T);
            assert!(o.allowed);
            assert_eq!(o.bucket, BucketId::Descriptor(0));
        }
        // The descriptor still has tokens, but the default bucket is empty.
        let o = l.request_allowed(&[0], T);
        assert_eq!((o.allowed, o.bucket), (false, BucketId::Default));
        assert_eq!(l.bucket(BucketId::Descriptor(0)).remaining(T), 6);
    }

    #[test]
    fn without_always_consume_a_match_spares_the_default_bucket() {
        let spec = LimiterSpec::new(
            bucket(1, 1, 60),
            vec![descriptor("k", "v", bucket(2, 1, 60))],
            false,
        );
        let l = Limiter::new(&spec, T);
        assert!(l.request_allowed(&[0], T).allowed);
        assert!(l.request_allowed(&[0], T).allowed);
        let o = l.request_allowed(&[0], T);
        assert_eq!((o.allowed, o.bucket), (false, BucketId::Descriptor(0)));
        assert_eq!(l.bucket(BucketId::Default).remaining(T), 1);
        assert!(l.request_allowed(&[], T).allowed);
        assert!(!l.request_allowed(&[], T).allowed);
    }

    #[test]
    fn the_first_refusing_descriptor_decides_and_earlier_ones_keep_their_loss() {
        let spec = LimiterSpec::new(
            bucket(100, 100, 1),
            vec![
                descriptor("slow", "x", bucket(1, 1, 60)),
                descriptor("fast", "y", bucket(5, 5, 1)),
            ],
            true,
        );
        let l = Limiter::new(&spec, T);
        assert!(l.request_allowed(&[0, 1], T).allowed);
        let o = l.request_allowed(&[0, 1], T);
        assert_eq!((o.allowed, o.bucket), (false, BucketId::Descriptor(0)));
        // The refusal by "slow" came first: "fast" and the default were not touched.
        assert_eq!(l.bucket(BucketId::Descriptor(1)).remaining(T), 4);
        assert_eq!(l.bucket(BucketId::Default).remaining(T), 99);
    }

    #[test]
    fn is_full_only_when_every_bucket_is() {
        let spec = LimiterSpec::new(
            bucket(1, 1, 1),
            vec![descriptor("k", "v", bucket(1, 1, 2))],
            true,
        );
        let l = Limiter::new(&spec, T);
        assert!(l.is_full(T));
        assert!(l.request_allowed(&[0], T).allowed);
        assert!(!l.is_full(T));
        assert!(
            !l.is_full(Duration::from_secs(1)),
            "the descriptor refills at 2 s"
        );
        assert!(l.is_full(Duration::from_secs(2)));
    }
}
