//! Counting the records sent under one key. After the switch neither rustls nor the kernel
//! counts them, yet AES-GCM keys must retire after 2^24 records (rustls'
//! `CipherSuiteCommon::confidentiality_limit`). The kernel cuts records of at most 16 KiB of
//! plaintext, and every send that does not set MSG_MORE ends one; so a send of `n` bytes adds
//! at most `n / 16 KiB + 1` records. Counting that bound overestimates (never by more than
//! one record per system call), which only makes the rekey come early.
//!
//! Only sending is counted: the confidentiality limit binds the encrypting side, which for
//! received records is the peer.

/// Plaintext bytes of a full TLS record.
pub const MAX_RECORD_PAYLOAD: usize = 16384;

/// The records left under the current TX key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordBudget {
    limit: u64,
    used: u64,
}

impl RecordBudget {
    /// A budget of `limit` records (u64::MAX: unlimited, as for ChaCha20-Poly1305).
    pub fn new(limit: u64) -> RecordBudget {
        RecordBudget { limit, used: 0 }
    }

    pub fn used(&self) -> u64 {
        self.used
    }

    /// The most bytes the next send may carry without passing the limit; 0 when the key must
    /// be retired first (even a small send ends a record).
    pub fn allowance(&self) -> usize {
        let left = self.limit.saturating_sub(self.used);
        if left < 2 {
            // The next send may finish a record left open by MSG_MORE and start another.
            return 0;
        }
        usize::try_from(left - 1)
            .unwrap_or(usize::MAX)
            .saturating_mul(MAX_RECORD_PAYLOAD)
    }

    /// Records a send (or a sendfile) that moved `bytes` bytes.
    pub fn charge(&mut self, bytes: usize) {
        let records = (bytes / MAX_RECORD_PAYLOAD) as u64 + 1;
        self.used = self.used.saturating_add(records);
    }

    /// Records one control record (alert, KeyUpdate).
    pub fn charge_record(&mut self) {
        self.used = self.used.saturating_add(1);
    }

    /// A new key: the count starts over.
    pub fn reset(&mut self) {
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_send_and_stops_at_the_limit() {
        let mut b = RecordBudget::new(10);
        assert_eq!(b.allowance(), 9 * MAX_RECORD_PAYLOAD);
        b.charge(1); // one small record
        assert_eq!(b.used(), 1);
        b.charge(MAX_RECORD_PAYLOAD); // one full record, maybe closing an open one
        assert_eq!(b.used(), 3);
        b.charge(3 * MAX_RECORD_PAYLOAD + 5);
        assert_eq!(b.used(), 7);
        assert_eq!(b.allowance(), 2 * MAX_RECORD_PAYLOAD);
        b.charge_record();
        assert_eq!(b.allowance(), MAX_RECORD_PAYLOAD);
        b.charge(10);
        assert_eq!(b.used(), 9);
        assert_eq!(b.allowance(), 0, "one record left is not enough for a send");
        b.reset();
        assert_eq!(b.allowance(), 9 * MAX_RECORD_PAYLOAD);
    }

    #[test]
    fn a_send_within_the_allowance_never_passes_the_limit() {
        for limit in 2..40u64 {
            let mut b = RecordBudget::new(limit);
            let mut sizes = [1usize, MAX_RECORD_PAYLOAD, 3 * MAX_RECORD_PAYLOAD + 1, 7]
                .iter()
                .cycle();
            while b.allowance() > 0 {
                let want = *sizes.next().unwrap_or(&1);
                let n = want.min(b.allowance());
                b.charge(n);
                assert!(b.used() <= limit, "limit {limit}: used {}", b.used());
            }
        }
    }

    #[test]
    fn unlimited_suites() {
        let mut b = RecordBudget::new(u64::MAX);
        b.charge(usize::MAX);
        assert!(b.allowance() > 0);
    }
}
