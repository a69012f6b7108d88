//! Per-transaction cache of transformed values and their prefilter hits.
//!
//! Every request value that does not change once set (an argument, a header, the URI, the
//! body) has a [`Slot`]; a transformed value is cached under (slot, chain id), so each value
//! is transformed once per distinct chain per transaction instead of once per rule, and the
//! prefilter runs once per distinct transformed buffer (chains that leave a value unchanged
//! share the original's scan). Lookups are plain vector indexing: nothing is hashed or
//! compared byte by byte.

use crate::chains::{ChainId, Chains, EMPTY_CHAIN};
use crate::prefilter::Prefilter;
use crate::transforms::Transform;
use crate::variables::VarName;

/// A value's identity in the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Scalar(u8),
    /// `list` numbers the collection (and names vs values), `index` the member.
    Member {
        list: u8,
        index: u32,
    },
}

/// Scalars whose value is fixed once set (or whose setter invalidates it).
pub(crate) fn scalar_slot(var: VarName) -> Option<Slot> {
    use VarName::*;
    let code = match var {
        RequestUri => 0,
        RequestUriRaw => 1,
        RequestFilename => 2,
        RequestBasename => 3,
        RequestLine => 4,
        RequestMethod => 5,
        RequestProtocol => 6,
        QueryString => 7,
        RequestBody => 8,
        ResponseBody => RESPONSE_BODY,
        _ => return None,
    };
    Some(Slot::Scalar(code))
}

pub(crate) const SCALARS: usize = 10;
const RESPONSE_BODY: u8 = 9;
/// At most this many emptied buffers are kept for the next transaction, each at most
/// `MAX_SPARE_BYTES` long (a 10 KB body's decoded copies are not worth keeping).
const MAX_SPARE_BUFFERS: usize = 4096;
const MAX_SPARE_BYTES: usize = 4096;
/// Longer values are not scanned by the prefilter: their hits count as unknown. The scan
/// costs ~60 instructions per byte (a 10 KB form body and its decoded copy were ~9 % of
/// the engine benchmark's POST), while the few CRS rules that read such a value (those on
/// REQUEST_BODY) search it with their regex's own literal prefilter for less.
const MAX_SCANNED_LEN: usize = 4096;
/// Values the cache is sized for before a phase; more grow it on demand.
const MAX_RESERVED_VALUES: usize = 1024;
/// Collections only ever appended to: see `Transaction::list_code`.
pub(crate) const LISTS: usize = 16;

/// A slot's region in `ValueCache::table`: per transformation its memo (see
/// `ValueCache::transform`), then the value's `Transform::hit_keeping_mask` with `MASK_KNOWN`
/// set once computed, its regex groups' answers (`group_answer`), 1 + the start of the
/// original's prefilter hits in `bits` (0 before its scan), then per chain id the value
/// under that chain (`Val::tag`).
fn region_len(chains: usize) -> usize {
    CHAINS_AT + chains
}

/// Offsets in a region.
const MASK_AT: usize = Transform::COUNT;
const GROUPS_AT: usize = Transform::COUNT + 1;
const ORIGINAL_BITS_AT: usize = Transform::COUNT + 2;
const CHAINS_AT: usize = Transform::COUNT + 3;

/// Transformations that may change a value's case: a hit-keeping bit (see `hit_keeping`)
/// means "no change" for every other one.
pub(crate) const CASE_CHANGING: u64 =
    Transform::Lowercase.bit() | Transform::Uppercase.bit() | Transform::CmdLine.bit();

const MASK_KNOWN: u32 = 1 << 31;
const _MASK_FITS: () = assert!(Transform::COUNT < 32);
const _GROUPS_FIT: () = assert!(2 * crate::rx_groups::MAX_GROUPS <= 32);

/// The prefilters a value's scans use: its class's (see `value_class`), and per
/// transformation a narrower one for the buffers that transformation makes, when the rule
/// set has one (see `RuleSet::made_by_prefilters`).
#[derive(Clone, Copy)]
pub(crate) struct Scans<'a> {
    pub class: &'a Prefilter,
    pub made_by: &'a [Option<Prefilter>],
}

impl<'a> Scans<'a> {
    pub fn of(class: &'a Prefilter) -> Scans<'a> {
        Scans {
            class,
            made_by: &[],
        }
    }

    pub fn words(&self) -> usize {
        self.class.words()
    }
}

/// For `ValueCache::steps`: the index of a node in the chain's path, and whether the nodes
/// after it are wanted given that node's value.
pub(crate) type StepCheck<'a> = (usize, &'a dyn Fn(&[u8]) -> bool);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    /// The value as collected (no transformation changed it).
    Original,
    Buf(usize),
}

impl Val {
    /// As kept in a region's chain slot (0 is "not computed").
    fn tag(self) -> u32 {
        match self {
            Val::Original => 1,
            Val::Buf(i) => u32::try_from(i + 2).unwrap_or(0),
        }
    }

    fn from_tag(tag: u32) -> Option<Val> {
        match tag {
            0 => None,
            1 => Some(Val::Original),
            t => Some(Val::Buf(t as usize - 2)),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct ValueCache {
    /// Per slot, a region (`region_len`): what each transformation makes of the original
    /// value, its masks and answers, and per chain id the value under that chain (kept in
    /// the region itself: an index into a vector of entries cost one more load and a
    /// 32-byte push per chain node, thousands per form POST).
    /// One flat table with a region per slot (allocated when the slot is first seen): a
    /// value meets dozens of chains (with prefixes) in CRS, and a vector per slot cost an
    /// allocation and a free per value and transaction.
    table: Vec<u32>,
    /// Per scalar slot, 1 + the start of its region in `table`, 0 for none yet.
    scalars: [u32; SCALARS],
    /// Per list, per member: 1 + the start of its region in `table`, 0 for none yet.
    lists: Vec<Vec<u32>>,
    bufs: Vec<Vec<u8>>,
    /// Emptied buffers of earlier transactions, for `transform` to write into: a transformed
    /// value then costs no allocation and no free (a GET makes ~50 of them, a form thousands).
    spare: Vec<Vec<u8>>,
    /// Per buffer, the start of its prefilter hit bits in `bits`, once scanned.
    buf_bits: Vec<Option<usize>>,
    /// Per buffer, the transformation that made it (`Transform as u8`).
    made_by: Vec<u8>,
    bits: Vec<u64>,
    path: Vec<ChainId>,
}

impl ValueCache {
    /// Forgets every value, keeping the memory (see `scratch`).
    pub fn clear(&mut self) {
        self.table.clear();
        self.scalars = [0; SCALARS];
        self.lists.iter_mut().for_each(Vec::clear);
        for mut buf in self.bufs.drain(..) {
            if self.spare.len() < MAX_SPARE_BUFFERS && buf.capacity() <= MAX_SPARE_BYTES {
                buf.clear();
                self.spare.push(buf);
            }
        }
        self.buf_bits.clear();
        self.made_by.clear();
        self.bits.clear();
        self.path.clear();
    }

    /// Roughly the heap memory the cache holds on to.
    pub fn retained_bytes(&self) -> usize {
        use std::mem::size_of;
        self.table.capacity() * size_of::<u32>()
            + self
                .lists
                .iter()
                .map(|l| l.capacity() * size_of::<u32>())
                .sum::<usize>()
            + self.bufs.capacity() * size_of::<Vec<u8>>()
            + self.spare.capacity() * size_of::<Vec<u8>>()
            + self.spare.iter().map(Vec::capacity).sum::<usize>()
            + self.buf_bits.capacity() * size_of::<Option<usize>>()
            + self.bits.capacity() * size_of::<u64>()
    }

    /// Room for `values` values, each meeting `chains` chains: about four buffers and scans
    /// each (most transformations leave a value alone).
    /// At most `MAX_RESERVED_VALUES` up front: a peer controls how many arguments a body
    /// has, and memory for values no rule reaches must not be taken eagerly.
    pub fn reserve(&mut self, values: usize, chains: usize, words: usize) {
        let values = values.min(MAX_RESERVED_VALUES);
        let want = |len: usize, per: usize| (values * per).saturating_sub(len);
        self.table
            .reserve(want(self.table.len(), region_len(chains)));
        self.bufs.reserve(want(self.bufs.len(), 4));
        self.buf_bits.reserve(want(self.buf_bits.len(), 4));
        self.bits.reserve(want(self.bits.len(), 5 * words));
    }

    /// Forgets a scalar whose value changed (the body grows between phases).
    pub fn invalidate(&mut self, slot: Slot) {
        if let Some(base) = self.base_mut(slot) {
            *base = 0;
        }
    }

    /// Forgets a whole collection that was replaced rather than appended to.
    pub fn invalidate_list(&mut self, list: u8) {
        if let Some(l) = self.lists.get_mut(usize::from(list)) {
            l.clear();
        }
    }

    /// Whether the region starting at `region` is scalar `code`'s.
    fn is_region_of(&self, code: u8, region: usize) -> bool {
        self.scalars
            .get(usize::from(code))
            .is_some_and(|&base| base as usize == region + 1)
    }

    /// Where `slot`'s region start is kept.
    fn base_mut(&mut self, slot: Slot) -> Option<&mut u32> {
        match slot {
            Slot::Scalar(code) => self.scalars.get_mut(usize::from(code)),
            Slot::Member { list, index } => {
                if self.lists.is_empty() {
                    self.lists.resize_with(LISTS, Vec::new);
                }
                let l = self.lists.get_mut(usize::from(list))?;
                let i = index as usize;
                if l.len() <= i {
                    l.resize(i + 1, 0);
                }
                l.get_mut(i)
            }
        }
    }

    /// Start in `table` of `slot`'s region (`region_len(chains)` long), allocated on first use.
    /// Asked ~4,000 times per form POST, mostly for regions that exist: that case reads
    /// two vectors and writes nothing (growing the list and the table is `new_region`'s).
    #[inline]
    fn region(&mut self, slot: Slot, chains: usize) -> Option<usize> {
        let base = match slot {
            Slot::Scalar(code) => self.scalars.get(usize::from(code)),
            Slot::Member { list, index } => self
                .lists
                .get(usize::from(list))
                .and_then(|l| l.get(index as usize)),
        };
        match base {
            Some(&b) if b > 0 => Some(b as usize - 1),
            _ => self.new_region(slot, chains),
        }
    }

    #[cold]
    #[inline(never)]
    fn new_region(&mut self, slot: Slot, chains: usize) -> Option<usize> {
        let next = self.table.len();
        let base = self.base_mut(slot)?;
        *base = u32::try_from(next + 1).ok()?;
        self.table.resize(next + region_len(chains), 0);
        Some(next)
    }

    /// The value of chain `chain` in the region starting at `region`, once computed.
    fn find(&self, region: usize, chain: ChainId) -> Option<Val> {
        Val::from_tag(*self.table.get(region + CHAINS_AT + chain as usize)?)
    }

    fn insert(&mut self, region: usize, chain: ChainId, value: Val) {
        if let Some(t) = self.table.get_mut(region + CHAINS_AT + chain as usize) {
            *t = value.tag();
        }
    }

    fn resolve<'v>(&'v self, v: Val, original: &'v [u8]) -> &'v [u8] {
        match v {
            Val::Original => original,
            Val::Buf(i) => self.bufs.get(i).map_or(&[][..], Vec::as_slice),
        }
    }

    /// `original` (the value of `slot`) under `chain`, and, with a prefilter, the hit bits of
    /// that prefilter on it. Computes and caches whatever is missing, reusing the longest
    /// cached prefix of the chain.
    pub fn get<'v>(
        &'v mut self,
        slot: Slot,
        original: &'v [u8],
        chain: ChainId,
        chains: &Chains,
        prefilter: Option<Scans<'_>>,
    ) -> (&'v [u8], Option<&'v [u64]>) {
        // No transformation and no scan wanted (CRS's `t:none` checks of the method, the
        // protocol, a header): the value as collected, with no region to look up.
        if chain == EMPTY_CHAIN && prefilter.is_none() {
            return (original, None);
        }
        let Some(region) = self.region(slot, chains.len()) else {
            return (original, None);
        };
        let value = match self.find(region, chain) {
            Some(value) => value,
            None => self.compute(region, original, chain, chains),
        };
        let bits = prefilter.map(|p| (self.bits_of_in(region, value, original, p), p.words()));
        let this: &'v ValueCache = self;
        let bits = bits.and_then(|(s, words)| this.bits.get(s..s + words));
        (this.resolve(value, original), bits)
    }

    /// The value after each node of `chain`'s path (`Chains::path`: the root, then each
    /// step), into `out` as buffer numbers (`None`: the original; see `step_value`): what a
    /// multiMatch rule tests, for one region lookup instead of one `get` per step. Steps
    /// that changed nothing share their input's number, so consecutive equal numbers are
    /// one value. With `check = Some((i, more))`, the path is computed up to its node `i`
    /// first, and the nodes after it only if `more(value at i)` says so (else `out` ends at
    /// node `i`).
    pub fn steps(
        &mut self,
        slot: Slot,
        original: &[u8],
        chain: ChainId,
        chains: &Chains,
        out: &mut smallvec::SmallVec<[Option<usize>; 16]>,
        check: Option<StepCheck<'_>>,
    ) {
        out.clear();
        let path = chains.path(chain);
        let Some(region) = self.region(slot, chains.len()) else {
            // As `get` answers then: the value as collected.
            out.extend(path.iter().map(|_| None));
            return;
        };
        let mut last = path.len();
        match check {
            Some((at, more)) if self.find(region, chain).is_none() => {
                let node = path.get(at).copied().unwrap_or(EMPTY_CHAIN);
                if node != EMPTY_CHAIN && self.find(region, node).is_none() {
                    // The nodes up to the check, from their longest cached prefix.
                    self.compute(region, original, node, chains);
                }
                if !more(self.resolve(self.node_value(region, node), original)) {
                    last = at + 1;
                }
            }
            _ => {}
        }
        if last == path.len() && self.find(region, chain).is_none() {
            // Computes and caches every node of the path below its longest cached prefix.
            self.compute(region, original, chain, chains);
        }
        for &node in path.iter().take(last) {
            out.push(match self.node_value(region, node) {
                Val::Original => None,
                Val::Buf(i) => Some(i),
            });
        }
    }

    /// The cached value of chain node `node` in the region starting at `region`.
    fn node_value(&self, region: usize, node: ChainId) -> Val {
        match node {
            EMPTY_CHAIN => Val::Original,
            _ => self.find(region, node).unwrap_or(Val::Original),
        }
    }

    /// The prefilter hits of a step's buffer when some chain already had it scanned (a gate
    /// union over a chain that ends at the same buffer); never scans.
    pub fn step_hits(&self, step: Option<usize>, p: &Prefilter) -> Option<&[u64]> {
        let start = (*self.buf_bits.get(step?)?)?;
        self.bits.get(start..start + p.words())
    }

    /// The bytes of a step `steps` gave.
    pub fn step_value<'v>(&'v self, step: Option<usize>, original: &'v [u8]) -> &'v [u8] {
        self.resolve(step.map_or(Val::Original, Val::Buf), original)
    }

    /// The prefilter hits of `original` under a chain with transformations `chain_mask`
    /// (`Chains::mask`), without transforming anything, when every step of that chain keeps
    /// them (`Transform::keeps_prefilter_hits`): the common case of a value with nothing to
    /// decode. `None` when the chain may change them; then `get` tells.
    pub fn hits_kept<'v>(
        &'v mut self,
        slot: Slot,
        original: &[u8],
        chain_mask: u64,
        chains: usize,
        p: &Prefilter,
    ) -> Option<&'v [u64]> {
        // One region lookup for both questions: this runs for every value of every
        // prefiltered rule whose gate is open.
        let region = self.region(slot, chains)?;
        // An empty chain keeps every hit: no pass over the value to say which steps do
        // (the response body's rules are all `t:none`).
        if chain_mask != 0 {
            let keeping = self.keeping_mask(region, original)?;
            if chain_mask & !keeping != 0 {
                return None;
            }
        }
        let start = self.bits_of(region, Val::Original, original, p);
        self.bits.get(start..start + p.words())
    }

    /// True when every transformation in `chain_mask` keeps the prefilter hits of `original`.
    pub fn keeps_hits(
        &mut self,
        slot: Slot,
        original: &[u8],
        chain_mask: u64,
        chains: usize,
    ) -> bool {
        chain_mask == 0
            || self
                .region(slot, chains)
                .and_then(|region| self.keeping_mask(region, original))
                .is_some_and(|keeping| chain_mask & !keeping == 0)
    }

    /// True when every transformation in `chain_mask` (`Chains::mask`) leaves `original`
    /// exactly as it is: the hit-keeping mask's bit means "no change" for all but the case
    /// changers and cmdLine (see `transform`), which are never taken for no-ops here.
    /// `mask`: the value's hit-keeping mask when the caller has it (no lookup then).
    pub fn changes_nothing(
        &mut self,
        slot: Slot,
        original: &[u8],
        chain_mask: u64,
        chains: usize,
        mask: Option<u64>,
    ) -> bool {
        chain_mask & CASE_CHANGING == 0
            && match mask {
                Some(keeping) => chain_mask & !keeping == 0,
                None => self.keeps_hits(slot, original, chain_mask, chains),
            }
    }

    /// The value's `Transform::hit_keeping_mask` and its own prefilter hits.
    pub fn own_hits<'v>(
        &'v mut self,
        slot: Slot,
        original: &[u8],
        chains: usize,
        p: &Prefilter,
    ) -> Option<(u64, &'v [u64])> {
        let region = self.region(slot, chains)?;
        let keeping = self.keeping_mask(region, original)?;
        let start = self.bits_of(region, Val::Original, original, p);
        Some((keeping, self.bits.get(start..start + p.words())?))
    }

    /// The value's own prefilter hits, without its hit-keeping mask (for a target whose
    /// gates all read it untransformed, the mask would never be asked for).
    pub fn original_hits<'v>(
        &'v mut self,
        slot: Slot,
        original: &[u8],
        chains: usize,
        p: &Prefilter,
    ) -> Option<&'v [u64]> {
        let region = self.region(slot, chains)?;
        let start = self.bits_of(region, Val::Original, original, p);
        self.bits.get(start..start + p.words())
    }

    /// `Transform::hit_keeping_mask` of the value whose region starts at `region`, computed
    /// on first use.
    fn keeping_mask(&mut self, region: usize, original: &[u8]) -> Option<u64> {
        let stored = self.table.get_mut(region + MASK_AT)?;
        if *stored & MASK_KNOWN == 0 {
            // Fits: COUNT < 32 bits.
            *stored = Transform::hit_keeping_mask(original) as u32 | MASK_KNOWN;
        }
        Some(u64::from(*stored & !MASK_KNOWN))
    }

    /// What the value's regex group `group` answered (see `rx_groups`): `Some(true)` when
    /// one of its regexes may match the value under the group's chain, `None` before it
    /// was asked. Two bits per group: known, then the answer.
    pub fn group_answer(&mut self, slot: Slot, chains: usize, group: u8) -> Option<bool> {
        let region = self.region(slot, chains)?;
        let word = *self.table.get(region + GROUPS_AT)?;
        let at = 2 * u32::from(group);
        (word >> at & 1 != 0).then_some(word >> (at + 1) & 1 != 0)
    }

    pub fn set_group_answer(&mut self, slot: Slot, chains: usize, group: u8, may_match: bool) {
        let Some(region) = self.region(slot, chains) else {
            return;
        };
        if let Some(word) = self.table.get_mut(region + GROUPS_AT) {
            let at = 2 * u32::from(group);
            *word |= (1 | u32::from(may_match) << 1) << at;
        }
    }

    /// Where the prefilter hits of `value` start in `bits`, scanning it on first use: one
    /// scan per distinct buffer, however many chains lead to it.
    fn bits_of(&mut self, region: usize, value: Val, original: &[u8], p: &Prefilter) -> usize {
        self.bits_of_in(region, value, original, Scans::of(p))
    }

    /// `bits_of` with a buffer scanned by the narrower prefilter of the transformation that
    /// made it, when `scans` has one: only rules whose chain has that transformation read a
    /// buffer it made (a buffer another chain reaches was made by the same step). The other
    /// rules' bits are set ("may match"), so even a reader left out could only be opened,
    /// never closed wrongly. The original's hits always come from its class's prefilter.
    fn bits_of_in(
        &mut self,
        region: usize,
        value: Val,
        original: &[u8],
        scans: Scans<'_>,
    ) -> usize {
        let p = scans.class;
        let known = match value {
            Val::Buf(i) => self.buf_bits.get(i).copied().flatten(),
            Val::Original => self
                .table
                .get(region + ORIGINAL_BITS_AT)
                .and_then(|&at| (at as usize).checked_sub(1)),
        };
        if let Some(start) = known {
            return start;
        }
        if let Val::Buf(i) = value {
            // A transformation that only changed case (cmdLine on plain words, lowercase
            // after a no-op decode): the prefilter ignores case, so the original's hits hold.
            if self
                .bufs
                .get(i)
                .is_some_and(|b| b.eq_ignore_ascii_case(original))
            {
                let start = self.bits_of(region, Val::Original, original, p);
                if let Some(b) = self.buf_bits.get_mut(i) {
                    *b = Some(start);
                }
                return start;
            }
        }
        let p = match value {
            Val::Buf(i) => self
                .made_by
                .get(i)
                .and_then(|&t| scans.made_by.get(usize::from(t)))
                .and_then(Option::as_ref)
                .unwrap_or(p),
            Val::Original => p,
        };
        let start = self.bits.len();
        self.bits.resize(start + p.words(), 0);
        let input = match value {
            Val::Buf(i) => self.bufs.get(i).map_or(&[][..], Vec::as_slice),
            Val::Original => original,
        };
        // The response body is scanned whatever its length: its rules' phrase lists
        // (php-errors.data's 1,831 phrases, sql-errors.data's 171...) would each search a
        // long body on their own, while one scan answers for all of them.
        let too_long = input.len() > MAX_SCANNED_LEN
            && !(value == Val::Original && self.is_region_of(RESPONSE_BODY, region));
        if let Some(out) = self.bits.get_mut(start..) {
            if too_long {
                // Every bit set: "may match", so every rule runs its own operator.
                out.fill(u64::MAX);
            } else {
                p.scan(input, out);
            }
        }
        match value {
            Val::Buf(i) => {
                if let Some(b) = self.buf_bits.get_mut(i) {
                    *b = Some(start);
                }
            }
            Val::Original => {
                // Not kept past `u32::MAX - 1` words: scanned again then, never wrong.
                let tag = u32::try_from(start + 1).unwrap_or(0);
                if let Some(b) = self.table.get_mut(region + ORIGINAL_BITS_AT) {
                    *b = tag;
                }
            }
        }
        start
    }

    /// Transforms `original` along `chain` from its longest cached prefix, caching every
    /// step; returns the value under `chain`.
    fn compute(&mut self, region: usize, original: &[u8], chain: ChainId, chains: &Chains) -> Val {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        let mut at = chain;
        let mut base = Val::Original;
        while at != EMPTY_CHAIN {
            if let Some(value) = self.find(region, at) {
                base = value;
                break;
            }
            path.push(at);
            at = chains.node(at).parent;
        }
        for &node in path.iter().rev() {
            if let Some(t) = chains.node(node).transform {
                base = self.transform(region, base, original, t);
            }
            self.insert(region, node, base);
        }
        self.path = path;
        base
    }

    /// `t` applied to `base`. Applied to the original value, the result is remembered per
    /// transformation: chains that differ only by steps that left the value alone
    /// (`t:urlDecodeUni,t:lowercase` and `t:lowercase` on a value with nothing to decode)
    /// then share one buffer, one transformation and one prefilter scan.
    fn transform(&mut self, region: usize, base: Val, original: &[u8], t: Transform) -> Val {
        let memo = region + t as usize;
        if base == Val::Original {
            match self.table.get(memo).copied() {
                Some(0) | None => {}
                Some(u32::MAX) => return Val::Original,
                Some(tag) => return Val::Buf(tag as usize - 1),
            }
        }
        // On the original, the value's hit-keeping mask (one pass, kept in its region, most
        // values need it anyway) answers for every transformation whose bit in it means
        // "changes nothing": all but the case changers and cmdLine.
        let noop = match (base, t) {
            (Val::Original, Transform::Lowercase | Transform::Uppercase | Transform::CmdLine) => {
                t.is_noop_for(original)
            }
            (Val::Original, _) => match self.keeping_mask(region, original) {
                Some(mask) => mask & t.bit() != 0,
                None => t.is_noop_for(original),
            },
            (Val::Buf(i), _) => t.is_noop_for(self.bufs.get(i).map_or(&[][..], Vec::as_slice)),
        };
        // Not `resolve`: that would borrow all of `self`, and `spare` is taken from below.
        let input = match base {
            Val::Original => original,
            Val::Buf(i) => self.bufs.get(i).map_or(&[][..], Vec::as_slice),
        };
        let out = if noop {
            base
        } else {
            let mut out = self.spare.pop().unwrap_or_default();
            t.apply_into(input, &mut out);
            self.bufs.push(out);
            self.buf_bits.push(None);
            self.made_by.push(t as u8);
            Val::Buf(self.bufs.len() - 1)
        };
        if base == Val::Original {
            let tag = match out {
                Val::Original => Some(u32::MAX),
                Val::Buf(i) => u32::try_from(i + 1).ok().filter(|&t| t != u32::MAX),
            };
            if let (Some(tag), Some(m)) = (tag, self.table.get_mut(memo)) {
                *m = tag;
            }
        }
        out
    }
}
