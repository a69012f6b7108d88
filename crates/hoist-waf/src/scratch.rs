//! Working memory handed from one transaction to the next.
//!
//! A transaction's value cache (a table region per value, transformed buffers, prefilter
//! hits), gate unions and TX map grow to tens of kilobytes on an ordinary GET. Allocated
//! afresh per request, that was a few hundred allocations, their frees (glibc consolidates
//! its free lists on every free over 64 KiB) and cold memory for every request. A finished
//! transaction gives them back to its rule set, cleared but with their capacity, and the
//! next one takes them; nothing of one request's values survives into the next.
//!
//! One exception, for the constant block (see `constant`), which gives every transaction the
//! same TX map of about ninety variables: the finished transaction's TX is kept as it is,
//! and the next transaction that replays the block rewrites it into the block's map (its
//! own variables are dropped, the block's overwrite the buffers of the same name), instead
//! of allocating every name and value again. It is never read before that.

use crate::captures::{Captures, HitCaptures};
use crate::gates::GateCache;
use crate::pair_list::PairList;
use crate::transaction::MatchedRule;
use crate::tx_vars::TxVars;
use crate::values::ValueCache;
use std::sync::Mutex;

/// At most this many sets are kept (a set per transaction in flight: a worker runs one
/// per connection with a request under way). With the size cap below, an idle rule set
/// holds at most 32 MiB of them.
const MAX_POOLED: usize = 32;
/// A set that grew past this (a form with near a thousand arguments sizes the value cache
/// for all of them) is freed rather than kept for every later request.
const MAX_RETAINED_BYTES: usize = 1 << 20;
/// TX starts with room for CRS's variables on a browser GET (58, one more per request
/// header), so the map is not rehashed while they arrive.
const TX_CAPACITY: usize = 128;
/// MATCHED_VARS of a rule that matched this many variables is not kept.
const MAX_MATCHED_VARS: usize = 64;
/// The list of matched rules is kept up to this length: CRS's bookkeeping rules match ~90
/// times on a GET, and growing the list from empty copied ~19 KB per request.
const MAX_MATCHED_RULES: usize = 512;
/// A request list (arguments, cookies, headers) with more entries than this is not kept: a
/// form of a thousand fields should not pin its buffers for every later request.
const MAX_LIST_ENTRIES: usize = 256;
/// Nor are the lists when their names and values hold more than this (a few large headers).
const MAX_LIST_BYTES: usize = 256 * 1024;
/// Macro expansion buffers longer than this are not kept.
const MAX_EXPANSION: usize = 64 * 1024;

#[derive(Debug)]
pub(crate) struct Scratch {
    pub values: Box<ValueCache>,
    pub gate_cache: GateCache,
    pub tx: TxVars,
    /// The last transaction's TX, entries and all: only ever rewritten into the constant
    /// block's (`Transaction::replay`).
    pub last_tx: TxVars,
    /// MATCHED_VARS' list, whose buffers `record_matches` rewrites.
    pub matched_vars: PairList,
    /// The variables a rule matched, before its actions run (`Transaction::hits`), and
    /// their captures (`Transaction::hit_captures`, `captures`).
    pub hits: PairList,
    pub hit_captures: HitCaptures,
    pub captures: Captures,
    /// The request's and response's lists, cleared, their entries' buffers kept.
    pub lists: Lists,
    /// The rules that matched (`Transaction::matched_rules`), cleared.
    pub matched: Vec<MatchedRule>,
    /// `setvar`'s expansion buffers (`Transaction::setvar_buf`, `setvar_name`).
    pub setvar_buf: Vec<u8>,
    pub setvar_name: Vec<u8>,
}

/// ARGS_GET, ARGS_POST, REQUEST_COOKIES, REQUEST_HEADERS and RESPONSE_HEADERS: a GET's ~40
/// names and values were two allocations each, freed with the transaction.
#[derive(Debug, Default)]
pub(crate) struct Lists {
    pub args_get: PairList,
    pub args_post: PairList,
    pub cookies: PairList,
    pub request_headers: PairList,
    pub response_headers: PairList,
}

impl Lists {
    fn all(&mut self) -> [&mut PairList; 5] {
        [
            &mut self.args_get,
            &mut self.args_post,
            &mut self.cookies,
            &mut self.request_headers,
            &mut self.response_headers,
        ]
    }
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            values: Box::default(),
            gate_cache: GateCache::default(),
            tx: TxVars::with_capacity(TX_CAPACITY),
            last_tx: TxVars::with_capacity(TX_CAPACITY),
            matched_vars: PairList::default(),
            hits: PairList::default(),
            hit_captures: HitCaptures::default(),
            captures: Captures::default(),
            lists: Lists::default(),
            matched: Vec::new(),
            setvar_buf: Vec::new(),
            setvar_name: Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct ScratchPool {
    free: Mutex<Vec<Scratch>>,
}

impl ScratchPool {
    pub fn take(&self) -> Scratch {
        let pooled = self.free.lock().ok().and_then(|mut free| free.pop());
        pooled.unwrap_or_else(Scratch::new)
    }

    /// Clears `s` (all but `last_tx`) and keeps it for the next transaction, unless the pool
    /// is full or `s` holds more memory than an ordinary request needs.
    pub fn give(&self, mut s: Scratch) {
        if s.values.retained_bytes() > MAX_RETAINED_BYTES
            || s.tx.capacity() > 8 * TX_CAPACITY
            || s.last_tx.capacity() > 8 * TX_CAPACITY
            || s.matched_vars.capacity() > MAX_MATCHED_VARS
            || s.hits.capacity() > MAX_MATCHED_VARS
            || !s.hit_captures.keepable()
            || s.captures.retained_bytes() > MAX_EXPANSION
            || s.matched.capacity() > MAX_MATCHED_RULES
            || s.lists
                .all()
                .iter()
                .any(|l| l.capacity() > MAX_LIST_ENTRIES)
            || s.lists
                .all()
                .iter()
                .map(|l| l.retained_bytes())
                .sum::<usize>()
                > MAX_LIST_BYTES
            || s.setvar_buf.capacity() > MAX_EXPANSION
            || s.setvar_name.capacity() > MAX_EXPANSION
        {
            return;
        }
        s.values.clear();
        s.gate_cache.changed();
        s.tx.clear();
        // A new transaction starts with no MATCHED_VARS (the buffers stay).
        s.matched_vars.clear();
        s.hits.clear();
        s.hit_captures.clear();
        s.captures.clear();
        s.lists.all().into_iter().for_each(PairList::clear);
        s.matched.clear();
        s.setvar_buf.clear();
        s.setvar_name.clear();
        if let Ok(mut free) = self.free.lock() {
            if free.len() < MAX_POOLED {
                free.push(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_bounded_number_of_ordinary_sets() {
        let pool = ScratchPool::default();
        for _ in 0..MAX_POOLED + 10 {
            pool.give(Scratch::new());
        }
        assert_eq!(pool.free.lock().map(|f| f.len()).ok(), Some(MAX_POOLED));
    }

    #[test]
    fn frees_a_set_that_grew_large() {
        let pool = ScratchPool::default();
        let mut s = Scratch::new();
        s.values.reserve(100_000, 300, 5);
        assert!(s.values.retained_bytes() > MAX_RETAINED_BYTES);
        pool.give(s);
        let mut s = Scratch::new();
        s.tx.reserve(10 * TX_CAPACITY);
        pool.give(s);
        // Many arguments, or a few large headers.
        let mut s = Scratch::new();
        for _ in 0..=MAX_LIST_ENTRIES {
            s.lists.args_post.push("a", b"1");
        }
        pool.give(s);
        let mut s = Scratch::new();
        s.lists
            .request_headers
            .push("x-big", &vec![b'x'; MAX_LIST_BYTES + 1]);
        pool.give(s);
        assert_eq!(pool.free.lock().map(|f| f.len()).ok(), Some(0));
        pool.give(Scratch::new());
        assert_eq!(pool.free.lock().map(|f| f.len()).ok(), Some(1));
    }
}
