//! Value classes: which prefilter scans a value, by where the value comes from.
//!
//! The rule set's prefilter looks for the literals of every prefiltered rule (~6,400 in
//! CRS), but most values are read by few of those rules. A request header's value, unless
//! some rule names that header, is read only by the rules that inspect every header (921140's
//! `[\n\r]`, 932170's `() {`, a handful more over all paranoia levels): scanning a 516-byte
//! `Authorization` token for all of CRS's literals cost about a tenth of the engine's work on
//! a small GET. So each source of values (a scalar such as REQUEST_LINE, the values or the
//! names of one collection) gets a prefilter of its own over the rules that can read its
//! members: those with a target on it whose selector is not a single key. A member whose key
//! some prefiltered rule names (`REQUEST_HEADERS:User-Agent`) gets a prefilter over those
//! rules and the rules that name its key. Every prefilter gives each rule the same slot, and
//! one that leaves a rule out reports it as "may match" (`Prefilter::build_for`): a class
//! drawn too narrow costs speed, never a match.
//!
//! A value's class depends only on its slot and key, so the hits the value cache keeps per
//! slot always come from the same prefilter.

use crate::collections::member_lists;
use crate::literals::Set;
use crate::prefilter::Prefilter;
use crate::values::{scalar_slot, Slot, LISTS, SCALARS};
use crate::variables::{Selector, Target, VarName};

/// The full prefilter's class.
const FULL: u8 = 0;

#[derive(Debug, Default)]
pub(crate) struct ValueClasses {
    /// The prefilter of class `c` at `c - 1`.
    narrow: Vec<Prefilter>,
    /// Per scalar slot code, its class.
    scalars: [u8; SCALARS],
    /// Per cache list, its members' class unless their key is in `named`.
    lists: [u8; LISTS],
    /// Per cache list, the keys (ASCII-lowercased) prefiltered rules name in it, each with
    /// the class of its members.
    named: Vec<Vec<(String, u8)>>,
}

/// Where a value comes from: a scalar slot code, or `SCALARS` + a cache list.
const SOURCES: usize = SCALARS + LISTS;

impl ValueClasses {
    /// `targets[slot]` are the targets of the rule with prefilter slot `slot` and `sets[slot]`
    /// its literal sets, as the full prefilter `full` was built from. A source gets its own
    /// prefilter when that looks for at most half of the full one's literals.
    pub fn build(targets: &[&[Target]], sets: &[Vec<Set>], full: &Prefilter) -> ValueClasses {
        let mut readers = vec![vec![false; sets.len()]; SOURCES];
        // Per list, each named key and the rules that name it.
        let mut named = vec![Vec::<(String, Vec<bool>)>::new(); LISTS];
        for (slot, targets) in targets.iter().enumerate() {
            for target in *targets {
                if let Some(Slot::Scalar(code)) = scalar_slot(target.var) {
                    readers[usize::from(code)][slot] = true;
                }
                for list in member_lists(target.var) {
                    let list = usize::from(list);
                    match &target.selector {
                        // XML selectors are paths, not member keys: every member may be read.
                        Selector::Key(key)
                            if list < usize::from(crate::collections::XML_TEXTS_LIST) =>
                        {
                            let key = key.to_ascii_lowercase();
                            let keys = &mut named[list];
                            let at = match keys.iter().position(|(k, _)| *k == key) {
                                Some(at) => at,
                                None => {
                                    keys.push((key, vec![false; sets.len()]));
                                    keys.len() - 1
                                }
                            };
                            if let Some(r) = keys.get_mut(at).and_then(|(_, r)| r.get_mut(slot)) {
                                *r = true;
                            }
                        }
                        _ => readers[SCALARS + list][slot] = true,
                    }
                }
            }
        }
        let mut classes = ValueClasses::default();
        // Sources read by the same rules share one prefilter.
        let mut built: Vec<(Vec<bool>, u8)> = Vec::new();
        let mut class_for = |classes: &mut ValueClasses, include: Vec<bool>| {
            if let Some(&(_, class)) = built.iter().find(|(r, _)| *r == include) {
                return class;
            }
            let class = classes.add(sets, &include, full);
            built.push((include, class));
            class
        };
        // A named member is read by its list's readers and by the rules that name it.
        for (list, keys) in named.into_iter().enumerate() {
            let list_readers = readers.get(SCALARS + list).cloned().unwrap_or_default();
            let mut classed = Vec::with_capacity(keys.len());
            for (key, naming) in keys {
                let include = (naming.iter().zip(&list_readers))
                    .map(|(a, b)| *a || *b)
                    .collect();
                classed.push((key, class_for(&mut classes, include)));
            }
            classes.named.push(classed);
        }
        for (source, include) in readers.into_iter().enumerate() {
            let class = class_for(&mut classes, include);
            match source.checked_sub(SCALARS) {
                None => classes.scalars[source] = class,
                Some(list) => classes.lists[list] = class,
            }
        }
        classes
    }

    /// The class of a prefilter over the rules `include` marks: a new one when it looks for
    /// at most half of the full prefilter's literals, else the full one.
    fn add(&mut self, sets: &[Vec<Set>], include: &[bool], full: &Prefilter) -> u8 {
        let Some(narrow) = Prefilter::build_for(sets, |slot| include.get(slot) == Some(&true))
        else {
            return FULL;
        };
        if narrow.literal_count() * 2 > full.literal_count() {
            return FULL;
        }
        let Ok(class) = u8::try_from(self.narrow.len() + 1) else {
            return FULL;
        };
        self.narrow.push(narrow);
        class
    }

    /// The prefilter for the value in `slot`, whose key (for a collection member) is `key`.
    /// Runs for every value of every prefiltered rule evaluated (thousands per form POST):
    /// a list with the full class, like ARGS in CRS, is answered without reading the key.
    #[inline]
    pub fn prefilter<'a>(&'a self, full: &'a Prefilter, slot: Slot, key: &str) -> &'a Prefilter {
        let class = match slot {
            Slot::Scalar(code) => self.scalars.get(usize::from(code)).copied(),
            Slot::Member { list, .. } => {
                let list = usize::from(list);
                match self.lists.get(list).copied() {
                    // A named key's rules include its list's, so a list of the full class
                    // has no narrower named keys.
                    Some(FULL) | None => None,
                    Some(class) => {
                        let named = self.named.get(list).map_or(&[][..], Vec::as_slice);
                        let own = named.iter().find(|(k, _)| k.eq_ignore_ascii_case(key));
                        Some(own.map_or(class, |&(_, c)| c))
                    }
                }
            }
        };
        self.of_class(full, class.unwrap_or(FULL))
    }

    /// The class of every value `var` yields, when it does not depend on the member's key
    /// (`None`: ask `prefilter` per value). Load time: rules keep it per target.
    pub fn class_of_var(&self, var: VarName) -> Option<u8> {
        if let Some(Slot::Scalar(code)) = scalar_slot(var) {
            return self.scalars.get(usize::from(code)).copied();
        }
        let mut class = None;
        for list in member_lists(var) {
            let list = usize::from(list);
            let c = *self.lists.get(list)?;
            if c != FULL && self.named.get(list).is_some_and(|n| !n.is_empty()) {
                return None;
            }
            if class.is_some_and(|other| other != c) {
                return None;
            }
            class = Some(c);
        }
        // No list (TX, counts...): no slot, so no value of it is scanned.
        Some(class.unwrap_or(FULL))
    }

    /// The prefilter of class `class`.
    #[inline]
    pub fn of_class<'a>(&'a self, full: &'a Prefilter, class: u8) -> &'a Prefilter {
        match class.checked_sub(1) {
            Some(i) => self.narrow.get(usize::from(i)).unwrap_or(full),
            None => full,
        }
    }

    /// How many sources have a prefilter of their own, and how many of those exist.
    #[cfg(test)]
    pub fn narrowed(&self) -> (usize, usize) {
        let sources = self.scalars.iter().chain(&self.lists);
        (sources.filter(|&&c| c != FULL).count(), self.narrow.len())
    }
}

#[cfg(test)]
mod tests {
    use crate::prefilter::{has_slot, Prefilter};
    use crate::rules::{Entry, RuleSet};
    use crate::values::Slot;
    use crate::Transaction;
    use std::path::Path;
    use std::sync::Arc;

    const RULES: &str = r#"
SecRule REQUEST_HEADERS "@rx everyheader" "id:1,phase:1,pass,nolog,setvar:tx.every=1"
SecRule REQUEST_HEADERS:X-Named "@rx namedonly" "id:2,phase:1,pass,nolog,setvar:tx.named=1"
SecRule ARGS|REQUEST_LINE "@rx argsonly" "id:3,phase:1,pass,nolog,setvar:tx.args=1"
SecRule REQUEST_COOKIES "@pm cookieone cookietwo cookiethree" "id:4,phase:1,pass,nolog,setvar:tx.cookie=1"
"#;

    fn slot_of(rules: &RuleSet, id: i64) -> u32 {
        rules.phases[0]
            .iter()
            .find_map(|e| match e {
                Entry::Rule(r) if r.id == id => r.prefilter_slot,
                _ => None,
            })
            .expect("a prefiltered rule")
    }

    /// The bits of rules 1, 2 and 3 as the prefilter of `slot` and `key` reports them for
    /// `value`.
    fn scan(rules: &RuleSet, slot: Slot, key: &str, value: &str) -> Vec<bool> {
        let p = rules.value_prefilter(slot, key).expect("a prefilter");
        let mut bits = vec![0; p.words()];
        p.scan(value.as_bytes(), &mut bits);
        [1, 2, 3]
            .map(|id| has_slot(&bits, slot_of(rules, id)))
            .to_vec()
    }

    #[test]
    fn a_header_is_scanned_for_the_rules_that_read_it() {
        let rules = RuleSet::from_str(RULES, Path::new("t.conf")).expect("loads");
        let header = Slot::Member { list: 6, index: 0 };
        let full = rules.prefilter().expect("a prefilter");
        // An unnamed header: only rule 1 is looked for; the others are "may match".
        let other = rules
            .value_prefilter(header, "X-Other")
            .expect("a prefilter");
        assert!(other.literal_count() < full.literal_count());
        assert_eq!(
            scan(&rules, header, "X-Other", "nothing"),
            [false, true, true]
        );
        assert_eq!(
            scan(&rules, header, "X-Other", "everyheader"),
            [true, true, true]
        );
        // A header a rule names (in any case) is scanned for that rule's literals too, and
        // only for those: rule 3 is "may match".
        for key in ["X-Named", "x-named"] {
            let named = rules.value_prefilter(header, key).expect("one");
            assert!(!std::ptr::eq(named, full) && !std::ptr::eq(named, other));
            assert_eq!(scan(&rules, header, key, "nothing"), [false, false, true]);
            assert_eq!(scan(&rules, header, key, "namedonly"), [false, true, true]);
            assert_eq!(
                scan(&rules, header, key, "everyheader"),
                [true, false, true]
            );
        }
        // REQUEST_LINE is read by rule 3 alone.
        let line =
            crate::values::scalar_slot(crate::variables::VarName::RequestLine).expect("a slot");
        assert_eq!(scan(&rules, line, "", "nothing"), [true, true, false]);
        assert_eq!(scan(&rules, line, "", "argsonly"), [true, true, true]);
        // One class per target where the key does not matter, the one `prefilter` gives.
        let classes = &rules.value_classes;
        use crate::variables::VarName;
        assert!(classes.class_of_var(VarName::RequestHeaders).is_none());
        let of_var = |var| classes.class_of_var(var).map(|c| classes.of_class(full, c));
        let same = |a: Option<&Prefilter>, b: Option<&Prefilter>| matches!((a, b), (Some(a), Some(b)) if std::ptr::eq(a, b));
        assert!(same(
            of_var(VarName::RequestLine),
            rules.value_prefilter(line, "")
        ));
        for list in [0, 2] {
            let arg = Slot::Member { list, index: 3 };
            assert!(same(of_var(VarName::Args), rules.value_prefilter(arg, "a")));
        }
        assert!(!same(of_var(VarName::Args), Some(full)));
    }

    #[test]
    fn rules_still_match_every_header_they_read() {
        let rules = Arc::new(RuleSet::from_str(RULES, Path::new("t.conf")).expect("loads"));
        let run = |headers: &[(&str, &str)]| {
            let mut tx = Transaction::new(rules.clone(), "192.0.2.1", "t");
            tx.process_request_line("GET", "/?a=argsonly", "HTTP/1.1");
            for (k, v) in headers {
                tx.add_request_header(k, v.as_bytes());
            }
            tx.process_request_headers();
            ["every", "named", "args"].map(|k| tx.tx_var(k).is_some())
        };
        assert_eq!(run(&[("X-Named", "namedonly")]), [false, true, true]);
        assert_eq!(run(&[("x-named", "everyheader")]), [true, false, true]);
        assert_eq!(
            run(&[("X-Other", "namedonly everyheader")]),
            [true, false, true]
        );
        assert_eq!(run(&[("X-Other", "argsonly")]), [false, false, true]);
    }

    #[test]
    fn sources_read_by_the_same_rules_share_a_prefilter() {
        let rules = RuleSet::from_str(RULES, Path::new("t.conf")).expect("loads");
        let (sources, prefilters) = rules.value_classes.narrowed();
        // Headers (rule 1), ARGS_GET and ARGS_POST values and REQUEST_LINE (rule 3), cookie
        // values (rule 4), the sources no prefiltered rule reads, and the header X-Named
        // (rules 1 and 2).
        assert_eq!(prefilters, 5);
        assert_eq!(sources, super::SOURCES);
    }
}
