//! What a regex requires: the literal sets, one literal of each of which occurs in every
//! match, read off the regex's syntax tree at load (see `prefilter`, which searches for them).
//! Literals are folded to ASCII lowercase; the prefilter searches ASCII-case-insensitively,
//! which can only add candidates, never lose one.

use regex_syntax::hir::{Class, Hir, HirKind};

pub type Set = Vec<Vec<u8>>;

/// Largest finite language kept exactly while combining sub-expressions.
const MAX_EXACT: usize = 64;
/// Largest literal set kept as a requirement; bigger sets filter too little to be worth it.
pub const MAX_REQUIRED: usize = 256;
/// Largest character class enumerated into literals.
const MAX_CLASS: u32 = 16;
/// Most literal sets one rule is filtered by (each a separate requirement).
const MAX_SETS: usize = 4;

/// What a sub-expression tells about the strings it matches.
struct Info {
    /// Every string it can match, when that is a small finite set.
    exact: Option<Set>,
    /// Every match contains one literal of each of these sets (a conjunction: `\$` followed
    /// by one of a hundred words requires `$` and one of the words); empty when nothing is
    /// known.
    required: Vec<Set>,
}

/// The requirements (ASCII-lowercased literal sets, see [`Info::required`]) that every match
/// of `pattern` meets, parsed as the `regex` crate parses it for a bytes regex, best first and
/// at most `MAX_SETS`; empty when no useful one exists (the regex can match the empty
/// string, or every set would be too large).
pub fn required_sets(pattern: &str) -> Vec<Set> {
    let Ok(hir) = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
    else {
        return Vec::new();
    };
    requirements(analyze(&hir))
}

/// Whether a value of ordinary words meets every one of `sets`: each has a member that is a
/// single ASCII letter, digit or space (CRS's Unix command regexes require one of `b`, `c`,
/// `e`, ... or a separator, and a space or one of `&|<>` after the command). A prefilter slot
/// with such sets lets nearly every value through.
pub fn met_by_words(sets: &[Set]) -> bool {
    sets.iter().all(|set| {
        set.iter()
            .any(|l| matches!(l[..], [b] if b.is_ascii_alphanumeric() || b == b' '))
    })
}

fn analyze(h: &Hir) -> Info {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => exact(vec![Vec::new()]),
        HirKind::Literal(lit) => exact(vec![lit.0.to_ascii_lowercase()]),
        HirKind::Class(class) => Info {
            exact: class_members(class),
            required: Vec::new(),
        },
        HirKind::Capture(c) => analyze(&c.sub),
        HirKind::Repetition(r) => {
            let sub = analyze(&r.sub);
            if r.min == 0 {
                // It may match the empty string: no requirement.
                let exact = match (r.max, sub.exact) {
                    (Some(1), Some(mut e)) => {
                        e.push(Vec::new());
                        Some(normalize(e))
                    }
                    _ => None,
                };
                Info {
                    exact,
                    required: Vec::new(),
                }
            } else {
                let once = r.min == 1 && r.max == Some(1);
                // `x{n,m}` (n >= 2) has n matches of `x` in a row in every match: with `x`'s
                // strings known, one of their n-fold products occurs (`\.{2,3}` needs `..`).
                let power = match &sub.exact {
                    Some(e) if r.min >= 2 => power(e, r.min),
                    _ => None,
                };
                let exact = match (&power, r.max) {
                    _ if once => sub.exact.clone(),
                    (Some(p), Some(max)) if max == r.min && !p.truncated => Some(p.set.clone()),
                    _ => None,
                };
                let mut required = requirements(sub);
                required.extend(power.map(|p| p.set));
                Info {
                    exact,
                    required: requirements(Info {
                        exact: None,
                        required,
                    }),
                }
            }
        }
        HirKind::Concat(subs) => concat(subs),
        HirKind::Alternation(subs) => alternation(subs),
    }
}

/// A product of `n` strings of a set, or (when that grows past `MAX_REQUIRED`) the first
/// `POWER_PREFIX` bytes of each: a match contains the whole product, so also its prefix.
struct Power {
    set: Set,
    /// Whether literals were cut to their prefix (the set is then no exact language).
    truncated: bool,
}

/// Prefix length products are cut to when they grow too many (the prefilter's scan keys on
/// four bytes; longer literals gain little).
const POWER_PREFIX: usize = 4;

fn power(set: &Set, n: u32) -> Option<Power> {
    if set.is_empty() || set.iter().any(Vec::is_empty) {
        return None;
    }
    let mut acc = Power {
        set: set.clone(),
        truncated: false,
    };
    for _ in 1..n {
        if acc.set.iter().all(|l| l.len() >= POWER_PREFIX) {
            // Cut or not, longer products only add bytes the scan does not key on.
            acc.truncated = true;
            break;
        }
        let mut next = Vec::with_capacity(acc.set.len() * set.len());
        for a in &acc.set {
            for b in set {
                let mut s = a.clone();
                s.extend_from_slice(b);
                next.push(s);
            }
        }
        let mut next = normalize(next);
        let mut truncated = acc.truncated;
        if next.len() > MAX_REQUIRED {
            next.iter_mut().for_each(|l| l.truncate(POWER_PREFIX));
            next = normalize(next);
            truncated = true;
        }
        if next.len() > MAX_REQUIRED {
            // `acc` holds fewer than `n` factors: still required, no longer exact.
            acc.truncated = true;
            break;
        }
        acc = Power {
            set: next,
            truncated,
        };
    }
    Some(acc)
}

fn exact(set: Set) -> Info {
    Info {
        exact: Some(set),
        required: Vec::new(),
    }
}

fn normalize(mut set: Set) -> Set {
    set.sort();
    set.dedup();
    set
}

/// Whether a class of these (first, last) ranges has at most `MAX_CLASS` members.
fn small(ranges: impl Iterator<Item = (u32, u32)>) -> bool {
    ranges.map(|(first, last)| last - first + 1).sum::<u32>() <= MAX_CLASS
}

fn class_members(class: &Class) -> Option<Set> {
    let mut out = Vec::new();
    match class {
        Class::Bytes(c) => {
            let ranges = c.ranges().iter();
            if !small(ranges.map(|r| (u32::from(r.start()), u32::from(r.end())))) {
                return None;
            }
            for r in c.ranges() {
                out.extend((r.start()..=r.end()).map(|b| vec![b.to_ascii_lowercase()]));
            }
        }
        Class::Unicode(c) => {
            let ranges = c.ranges().iter();
            if !small(ranges.map(|r| (u32::from(r.start()), u32::from(r.end())))) {
                return None;
            }
            for r in c.ranges() {
                for ch in r.start()..=r.end() {
                    let mut buf = [0u8; 4];
                    out.push(ch.encode_utf8(&mut buf).as_bytes().to_ascii_lowercase());
                }
            }
        }
    }
    Some(normalize(out))
}

/// Everything known to be required: the exact set (when it has no empty string) and the
/// required sets, without repeats: the best first, then the punctuated ones (the only
/// further sets the prefilter uses, see `punctuated`), then the rest.
fn requirements(info: Info) -> Vec<Set> {
    let mut sets = info.required;
    if let Some(e) = info.exact {
        sets.push(e);
    }
    sets.retain(usable);
    sets.sort_by(|a, b| score(a).total_cmp(&score(b)));
    if let Some((_, rest)) = sets.split_first_mut() {
        // Stable: each group keeps its order by score.
        rest.sort_by_key(|s| !punctuated(s));
    }
    let mut out: Vec<Set> = Vec::with_capacity(MAX_SETS);
    for s in sets {
        if out.len() == MAX_SETS {
            break;
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Whether each literal of `set` holds a byte that is not a letter, digit or whitespace
/// (`$`, `(`, `=`, `${`): ordinary text rarely has one, so such a set often rules out a
/// regex whose words occurred.
pub fn punctuated(set: &Set) -> bool {
    set.iter().all(|l| {
        l.iter()
            .any(|b| !b.is_ascii_alphanumeric() && !b.is_ascii_whitespace())
    })
}

/// A set that can serve as a requirement: some literals, none empty, not too many.
fn usable(set: &Set) -> bool {
    !set.is_empty() && set.len() <= MAX_REQUIRED && set.iter().all(|s| !s.is_empty())
}

/// How often a set's literals occur in ordinary request values, roughly: the sum of each
/// literal's chance at one position, the product of its bytes' frequencies (`frequency`).
/// Lower is better. Length alone ranked `{int, iv, oid, text, ...}` (942320's `::int`
/// branch) above `{::}`, and a form value of plain words then let the rule through.
fn score(set: &Set) -> f64 {
    set.iter()
        .map(|l| l.iter().map(|&b| frequency(b)).product::<f64>())
        .sum()
}

/// A byte's share of ordinary request values (ASCII-lowercased): English letter frequencies
/// over 60 % of the bytes but no letter under 1 % (request values are not prose: `z` is in
/// every `Mozilla` user agent and `gzip`, `x` in `xhtml` and `x86_64`), digits and space
/// 15 % and 10 %, the punctuation of URLs, dates, cookies and prose about 1 % each, other
/// bytes rare. Only the order of sets depends on it. (Counting parentheses as common, as
/// every browser's User-Agent has them, cost the form POST 1.5 % more scan work.)
fn frequency(b: u8) -> f64 {
    const LETTERS: [f64; 26] = [
        8.2, 1.5, 2.8, 4.3, 12.7, 2.2, 2.0, 6.1, 7.0, 0.15, 0.77, 4.0, 2.4, 6.7, 7.5, 1.9, 0.095,
        6.0, 6.3, 9.1, 2.8, 0.98, 2.4, 0.15, 2.0, 0.074,
    ];
    match b {
        b'a'..=b'z' => {
            let percent = LETTERS.get(usize::from(b - b'a')).copied().unwrap_or(0.0);
            (percent / 100.0 * 0.6).max(0.01)
        }
        b'0'..=b'9' => 0.015,
        b' ' => 0.1,
        b'.' | b'-' | b'_' | b'/' | b',' | b'=' | b'&' | b':' | b';' | b'%' | b'+' => 0.008,
        b'!'..=b'~' | b'\t' | b'\n' | b'\r' => 0.001,
        _ => 0.0005,
    }
}

/// A concatenation's runs of exactly-known parts multiply into longer literals; every run and
/// every part's requirement is a requirement of the whole.
fn concat(subs: &[Hir]) -> Info {
    let mut run: Option<Set> = Some(vec![Vec::new()]);
    let mut all_exact = true;
    let mut required = Vec::new();
    for sub in subs {
        let info = analyze(sub);
        match (run.take(), info.exact) {
            (Some(r), Some(e)) if r.len() * e.len() <= MAX_EXACT => {
                let mut next = Vec::with_capacity(r.len() * e.len());
                for a in &r {
                    for b in &e {
                        let mut s = a.clone();
                        s.extend_from_slice(b);
                        next.push(s);
                    }
                }
                run = Some(normalize(next));
            }
            (r, e) => {
                all_exact = false;
                required.extend(r);
                required.extend(info.required);
                run = e;
            }
        }
    }
    let exact = if all_exact { run.clone() } else { None };
    required.extend(run);
    Info {
        exact,
        required: requirements(Info {
            exact: None,
            required,
        }),
    }
}

/// Adds `union` (normalized) to `required` unless it is too large to filter.
fn push_union(required: &mut Vec<Set>, union: Set) {
    let union = normalize(union);
    if union.len() <= MAX_REQUIRED {
        required.push(union);
    }
}

/// A match of an alternation matches one branch, so it contains one literal of the union of
/// the branches' best sets; and of the union of their second-best sets (a branch with only
/// one set lends it again), and so on.
fn alternation(subs: &[Hir]) -> Info {
    let infos: Vec<Info> = subs.iter().map(analyze).collect();
    let mut exact = Some(Vec::new());
    for info in &infos {
        exact = match (exact, &info.exact) {
            (Some(mut acc), Some(e)) if acc.len() + e.len() <= MAX_EXACT => {
                acc.extend(e.iter().cloned());
                Some(acc)
            }
            _ => None,
        };
    }
    let branches: Vec<Vec<Set>> = infos.into_iter().map(requirements).collect();
    let mut required = Vec::new();
    if branches.iter().all(|b| !b.is_empty()) {
        let depth = branches.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..depth {
            let union = branches
                .iter()
                .filter_map(|b| b.get(i).or(b.last()))
                .flatten()
                .cloned()
                .collect();
            push_union(&mut required, union);
        }
        // Unions of punctuated sets only, each branch lending its best one again when it
        // has no further one: a union with one branch's word in it is no further set to the
        // prefilter, and 941170's `-moz-binding` branch (`-`, `:`, `(`) then filtered by `-`
        // alone, which `hoist-load/0.1` has, with its `javascript:` branch's `name`.
        let marked: Vec<Vec<&Set>> = branches
            .iter()
            .map(|b| b.iter().filter(|s| punctuated(s)).collect())
            .collect();
        if marked.iter().all(|p| !p.is_empty()) {
            let depth = marked.iter().map(Vec::len).max().unwrap_or(0);
            for i in 0..depth {
                let union = marked
                    .iter()
                    .filter_map(|p| p.get(i).or(p.first()))
                    .flat_map(|s| s.iter())
                    .cloned()
                    .collect();
                push_union(&mut required, union);
            }
        }
    }
    Info {
        exact: exact.map(normalize),
        required: requirements(Info {
            exact: None,
            required,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(set: Set) -> Vec<String> {
        set.into_iter()
            .map(|l| String::from_utf8_lossy(&l).into_owned())
            .collect()
    }

    /// The best set alone.
    fn lits(p: &str) -> Option<Vec<String>> {
        required_sets(p).into_iter().next().map(strings)
    }

    fn all_sets(p: &str) -> Vec<Vec<String>> {
        required_sets(p).into_iter().map(strings).collect()
    }

    #[test]
    fn every_required_part_is_kept() {
        // `$` and one of the words: both required (`$` is rarer in ordinary text than `or`,
        // so its set comes first).
        assert_eq!(
            all_sets("(?s-u)(?i)\\[?\\$\\s*(?:abs|and|or)"),
            vec![vec!["$", "[$"], vec!["abs", "and", "or"]]
        );
        // Branches pair their sets: `=` or `(` from one, `id` or `cmd` from the other.
        let sets = all_sets("(?s-u)(?:id\\s*=|cmd\\s*\\()");
        assert!(
            sets.contains(&vec!["cmd".to_string(), "id".to_string()]),
            "{sets:?}"
        );
        assert!(
            sets.contains(&vec!["(".to_string(), "=".to_string()]),
            "{sets:?}"
        );
        // A branch with no requirement leaves the alternation none.
        assert!(all_sets("(?s-u)(?:id=|x*)").is_empty());
    }

    #[test]
    fn rare_literals_come_before_common_short_words() {
        // 942320's `::int` branch: `::` is rarer in request values than `int` or `text`
        // (length alone ranked the words first, and plain prose met them).
        assert_eq!(
            lits("(?s-u)(?i)::\\s*(?:int|oid|text)|exec"),
            Some(vec!["::".into(), "exec".into()])
        );
    }

    #[test]
    fn repetitions_require_their_product() {
        // 930110: two dots in a row, not just one.
        assert_eq!(
            lits("(?:^|[/;\\x5c])\\.{2,3}[/;\\x5c]"),
            Some(vec!["..".into()])
        );
        // An exact count stays an exact language and multiplies on through the concatenation.
        assert_eq!(
            lits("(?s-u)(?:ab|c){2}d"),
            Some(
                vec!["ababd", "abcd", "cabd", "ccd"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )
        );
        // Too many products (17 x 17): cut to four-byte prefixes, which every match still
        // contains; a cut product is no exact language, so nothing is appended to it.
        let units: Vec<String> = (b'0'..=b'9')
            .chain(b'A'..=b'G')
            .map(|c| format!("%u{}", c as char))
            .collect();
        let alternation = units.join("|");
        let prefixes: Vec<String> = units
            .iter()
            .map(|u| format!("{}%", u.to_lowercase()))
            .collect();
        assert_eq!(
            lits(&format!("(?s-u)(?:{alternation}){{2,}}/")),
            Some(prefixes.clone())
        );
        let sets = all_sets(&format!("(?s-u)(?:{alternation}){{2}}x"));
        assert!(sets.contains(&prefixes), "{sets:?}");
        assert!(
            sets.iter().flatten().all(|l| l == "x" || !l.ends_with('x')),
            "{sets:?}"
        );
        // `x{1,}` and `x{0,n}` are unchanged: one `x`, or nothing.
        assert_eq!(lits("(?s-u)(?:ab){1,3}"), Some(vec!["ab".into()]));
        assert_eq!(lits("(?s-u)(?:ab){0,3}"), None);
    }

    /// Every literal of a repetition's product occurs in a string the regex matches.
    #[test]
    fn repetition_products_occur_in_matches() {
        let re = regex::bytes::Regex::new("(?i)(?:\\.|\\?\\.?|%2e|0x2e){2,3}[/\\x5c]")
            .expect("compiles");
        let sets = required_sets(re.as_str());
        assert!(!sets.is_empty());
        for hay in [
            &b"..\\"[..],
            b"x?./",
            b"%2E0x2e/",
            b"..?/",
            b"?.?./",
            b"0X2E%2e.\\",
        ] {
            assert!(re.is_match(hay), "{hay:?}");
            let lower = hay.to_ascii_lowercase();
            for set in &sets {
                assert!(
                    set.iter()
                        .any(|l| lower.windows(l.len()).any(|w| w == &l[..])),
                    "{hay:?} lacks every literal of {set:?}"
                );
            }
        }
    }

    #[test]
    fn literal_and_alternation() {
        assert_eq!(lits("(?s-u)abc"), Some(vec!["abc".into()]));
        assert_eq!(
            lits("(?s-u)(?i)(?:union|select)"),
            Some(vec!["select".into(), "union".into()])
        );
        // A small class after an alternation multiplies out: longer, exact literals.
        let ws = lits("(?s-u)(?i)(?:union|select)\\s").unwrap_or_default();
        assert_eq!(ws.len(), 12);
        assert!(ws.contains(&"select ".to_string()) && ws.contains(&"union\t".to_string()));
    }

    #[test]
    fn case_insensitive_classes_fold_to_one_literal() {
        assert_eq!(lits("(?s-u)(?i)SeLeCt"), Some(vec!["select".into()]));
        // Unicode case folding adds non-ASCII members (K: the Kelvin sign); kept exactly.
        let k = lits("(?s)(?i)k").unwrap_or_default();
        assert!(k.contains(&"k".to_string()) && k.len() == 2, "{k:?}");
    }

    #[test]
    fn no_requirement_when_empty_matches() {
        assert_eq!(lits("(?s-u)a*"), None);
        assert_eq!(lits("(?s-u)^"), None);
        assert_eq!(lits("(?s-u)(?:abc)?"), None);
        assert_eq!(lits("(?s-u)abc|x*"), None);
    }

    #[test]
    fn requirement_inside_concat_with_unknowns() {
        // `.+` is unknown, but the literal around it is required.
        assert_eq!(lits("(?s-u).+select.+"), Some(vec!["select".into()]));
        // Equal scores: the first required part wins.
        assert_eq!(lits("(?s-u)[a-z]+=\\d+&"), Some(vec!["=".into()]));
    }
}
