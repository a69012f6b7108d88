//! Variable extraction: a rule target → the (name, value) items it inspects, with selectors
//! and exclusions applied. Values are borrowed from the transaction wherever possible.

use crate::body::PairSlice;
use crate::transaction::Transaction;
use crate::values::{scalar_slot, Slot};
use crate::variables::{Exclusion, Selector, Target, VarName};
use smallvec::SmallVec;
use std::borrow::Cow;

/// The items of one rule: most rules see a handful, so they live on the stack.
pub(crate) type Items<'a> = SmallVec<[Item<'a>; 8]>;

/// The counts a `&VAR` item most often holds, as text.
const SMALL_COUNTS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

pub struct Item<'a> {
    pub var: VarName,
    pub key: Cow<'a, str>,
    pub value: Cow<'a, [u8]>,
    /// Set when the value is stable for the transaction, so its transformations are cached.
    pub slot: Option<Slot>,
}

impl Item<'_> {
    /// `ARGS:foo` or `REQUEST_URI`, as MATCHED_VAR_NAME and log lines show it.
    /// Appends the item's name (`VAR` or `VAR:key`) to `out`. Not format!: this runs for
    /// every matching value, and the formatting machinery cost more than the match.
    pub fn write_name(&self, out: &mut String) {
        out.push_str(self.var.as_str());
        if !self.key.is_empty() || is_collection(self.var) {
            out.push(':');
            out.push_str(&self.key);
        }
    }
}

fn is_collection(var: VarName) -> bool {
    use VarName::*;
    matches!(
        var,
        Args | ArgsGet
            | ArgsPost
            | ArgsNames
            | ArgsGetNames
            | ArgsPostNames
            | RequestCookies
            | RequestCookiesNames
            | RequestHeaders
            | RequestHeadersNames
            | Files
            | FilesNames
            | MultipartPartHeaders
            | Xml
            | Tx
            | MatchedVars
            | MatchedVarsNames
            | ResponseHeaders
            | ResponseHeadersNames
    )
}

pub(crate) const XML_TEXTS_LIST: u8 = 14;
pub(crate) const XML_ATTRIBUTES_LIST: u8 = 15;

/// The pair lists behind a collection variable, as codes: 0 ARGS_GET, 1 ARGS_POST, 2
/// cookies, 3 request headers, 4 response headers, 5 FILES, 6 multipart part headers.
fn pair_codes(var: VarName) -> [Option<u8>; 2] {
    use VarName::*;
    match var {
        Args | ArgsNames => [Some(0), Some(1)],
        ArgsGet | ArgsGetNames => [Some(0), None],
        ArgsPost | ArgsPostNames => [Some(1), None],
        RequestCookies | RequestCookiesNames => [Some(2), None],
        RequestHeaders | RequestHeadersNames => [Some(3), None],
        ResponseHeaders | ResponseHeadersNames => [Some(4), None],
        Files | FilesNames => [Some(5), None],
        MultipartPartHeaders => [Some(6), None],
        _ => [None, None],
    }
}

/// Whether a collection variable yields its members' names rather than their values.
fn yields_names(var: VarName) -> bool {
    matches!(
        var,
        VarName::ArgsNames
            | VarName::ArgsGetNames
            | VarName::ArgsPostNames
            | VarName::RequestCookiesNames
            | VarName::RequestHeadersNames
            | VarName::ResponseHeadersNames
            | VarName::FilesNames
            | VarName::MatchedVarsNames
    )
}

/// The cache lists (see [`Slot`]) whose members `var` reads: what `visit` and `collect` give
/// their items' slots.
pub(crate) fn member_lists(var: VarName) -> impl Iterator<Item = u8> {
    let xml: &[u8] = match var {
        VarName::Xml => &[XML_TEXTS_LIST, XML_ATTRIBUTES_LIST],
        _ => &[],
    };
    let names = yields_names(var);
    pair_codes(var)
        .into_iter()
        .flatten()
        .filter_map(move |code| match member_slot(code, names, 0) {
            Some(Slot::Member { list, .. }) => Some(list),
            _ => None,
        })
        .chain(xml.iter().copied())
}

/// Pair list `code` (0..=6) has names at `2 * code + 1` and values at `2 * code`; XML lists
/// are 14 and 15.
fn member_slot(code: u8, names: bool, index: usize) -> Option<Slot> {
    let list = if code < 7 {
        code * 2 + u8::from(names)
    } else {
        code
    };
    Some(Slot::Member {
        list,
        index: u32::try_from(index).ok()?,
    })
}

impl Transaction {
    /// The collections behind `var`, each with its code (see `pair_codes`): lists that are
    /// only appended to have one; MATCHED_VARS, rewritten per rule, has none.
    fn pairs(&self, var: VarName) -> [(&PairSlice, Option<u8>); 2] {
        use VarName::*;
        let codes = pair_codes(var);
        let slice = |code: Option<u8>| -> &PairSlice {
            match code {
                Some(0) => self.args_get.as_slice(),
                Some(1) => self.args_post.as_slice(),
                Some(2) => self.cookies.as_slice(),
                Some(3) => self.request_headers.as_slice(),
                Some(4) => self.response_headers.as_slice(),
                Some(5) => &self.files,
                Some(6) => &self.multipart_part_headers,
                _ if matches!(var, MatchedVars | MatchedVarsNames) => self.matched_vars.as_slice(),
                _ => &self.empty,
            }
        };
        let [a, b] = codes;
        let first = (slice(a), a);
        let second = match b {
            Some(_) => (slice(b), b),
            None => (&self.empty as &PairSlice, None),
        };
        [first, second]
    }

    /// Scalar variables; `None` when unset (so it yields no item at all).
    pub(crate) fn scalar(&self, var: VarName) -> Option<Cow<'_, [u8]>> {
        use VarName::*;
        fn b(v: &[u8]) -> Option<Cow<'_, [u8]>> {
            Some(Cow::Borrowed(v))
        }
        fn s(v: &str) -> Option<Cow<'_, [u8]>> {
            Some(Cow::Borrowed(v.as_bytes()))
        }
        let n = |v: usize| Some(Cow::Owned(v.to_string().into_bytes()));
        match var {
            RequestUri => s(&self.uri),
            RequestUriRaw => s(&self.uri_raw),
            RequestFilename => s(&self.filename),
            RequestBasename => {
                let base = self.filename.rsplit(['/', '\\']).next().unwrap_or("");
                s(base)
            }
            RequestLine => s(&self.request_line),
            RequestMethod => s(&self.method),
            RequestProtocol => s(&self.protocol),
            QueryString => s(&self.query),
            RequestBody => self
                .request_body_visible
                .then_some(Cow::Borrowed(self.request_body.as_slice())),
            RequestBodyLength => n(self.request_body.len()),
            ReqbodyProcessor => {
                // Empty rather than absent without a processor, so `!@rx` rules (CRS 901340)
                // see it.
                s(self.body_processor.map_or("", |p| p.as_str()))
            }
            ReqbodyError => s(if self.reqbody_error.is_some() {
                "1"
            } else {
                "0"
            }),
            ReqbodyErrorMsg => s(self.reqbody_error.as_deref().unwrap_or("")),
            ArgsCombinedSize => n(self
                .args_get
                .as_slice()
                .iter()
                .chain(self.args_post.as_slice())
                .map(|(k, v)| k.len() + v.len())
                .sum()),
            FilesCombinedSize => n(self.file_sizes.iter().sum()),
            MultipartStrictError => s(if self.multipart_strict_error {
                "1"
            } else {
                "0"
            }),
            MultipartUnmatchedBoundary => s(if self.multipart_unmatched_boundary {
                "1"
            } else {
                "0"
            }),
            MatchedVar => self
                .matched_vars
                .last()
                .map(|(_, v)| Cow::Borrowed(v.as_slice())),
            MatchedVarName => self
                .matched_vars
                .last()
                .map(|(k, _)| Cow::Borrowed(k.as_bytes())),
            RemoteAddr => s(&self.remote_addr),
            UniqueId => s(&self.unique_id),
            ResponseBody => b(&self.response_body),
            ResponseStatus => n(usize::from(self.response_status)),
            ResponseProtocol => s(&self.response_protocol),
            ResponseContentType => self
                .response_headers
                .as_slice()
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                .map(|(_, v)| Cow::Borrowed(v.as_slice())),
            _ => None,
        }
    }

    /// Appends the items `target` yields, minus `exclusions`.
    pub(crate) fn collect<'a>(
        &'a self,
        target: &'a Target,
        exclusions: &[&Exclusion],
        out: &mut Items<'a>,
    ) {
        let var = target.var;
        let excluded = |key: &str| exclusions.iter().any(|e| e.excludes(var, key));
        let start = out.len();
        match var {
            VarName::Tx => {
                match &target.selector {
                    // Folded at parse time (see `variables::parse_selector`).
                    Selector::Key(k) => {
                        if let Some((k, v)) = self.tx.get_key_value(k.as_str()) {
                            out.push(Item {
                                var,
                                key: Cow::Borrowed(k.as_str()),
                                value: Cow::Borrowed(v),
                                slot: None,
                            });
                        }
                    }
                    sel => {
                        let item = |(k, v): (&'a String, &'a Vec<u8>)| Item {
                            var,
                            key: Cow::Borrowed(k.as_str()),
                            value: Cow::Borrowed(v.as_slice()),
                            slot: None,
                        };
                        let keep = |k: &str| sel.matches_folded(k);
                        // After the constant block's replay, TX is that block's TX but for
                        // the names written since: those and the block's names the
                        // selector takes (worked out with the plan) are all there is to see.
                        let since_replay = self
                            .constant_tx
                            .then(|| self.rules.constant_plan().block()?.tx_selection(sel))
                            .flatten()
                            .and_then(|base| self.tx.matching_since_reset(base, keep));
                        match since_replay {
                            Some(found) => out.extend(found.map(item)),
                            None => out.extend(self.tx.matching_in_order(keep).map(item)),
                        }
                    }
                }
                out.retain(|i| i.var != var || !excluded(&i.key));
            }
            VarName::Xml => {
                let (list, code) = self.xml_list(&target.selector);
                let key: Cow<'a, str> = match &target.selector {
                    Selector::Key(k) => Cow::Borrowed(k),
                    _ => Cow::Borrowed("/*"),
                };
                for (index, v) in list.iter().enumerate() {
                    out.push(Item {
                        var,
                        key: key.clone(),
                        value: Cow::Borrowed(v),
                        slot: member_slot(code, false, index),
                    });
                }
            }
            _ => {
                self.visit(target, exclusions, &mut |item| out.push(item));
            }
        }
        if target.count {
            let count = out.len() - start;
            out.truncate(start);
            let key = match &target.selector {
                Selector::Key(k) => Cow::Borrowed(k.as_str()),
                _ => Cow::Borrowed(""),
            };
            // CRS counts mostly to tell 0 from 1 (`&TX:x "@eq 0"`): no allocation for those.
            let value = match SMALL_COUNTS.get(count) {
                Some(digits) => Cow::Borrowed(digits.as_bytes()),
                None => Cow::Owned(count.to_string().into_bytes()),
            };
            out.push(Item {
                var,
                key,
                value,
                slot: None,
            });
        }
    }

    /// The XML values a selector names (as CRS uses `XML:/*`: every text node, or every
    /// attribute value for a path with `@`), and their list code.
    fn xml_list(&self, selector: &Selector) -> (&[Vec<u8>], u8) {
        if matches!(selector, Selector::Key(k) if k.contains('@')) {
            (&self.xml.attributes, XML_ATTRIBUTES_LIST)
        } else {
            (&self.xml.texts, XML_TEXTS_LIST)
        }
    }

    /// Whether `visit` yields every item of `target` (not TX, XML or a count, which
    /// only `collect` gathers).
    pub(crate) fn visitable(target: &Target) -> bool {
        !target.count && !matches!(target.var, VarName::Tx | VarName::Xml)
    }

    /// Calls `f` with each item of a collection or scalar `target`, minus `exclusions`, in
    /// `collect`'s order: rule evaluation takes them one by one, with no list to build.
    pub(crate) fn visit<'a>(
        &'a self,
        target: &Target,
        exclusions: &[&Exclusion],
        f: &mut dyn FnMut(Item<'a>),
    ) {
        let var = target.var;
        let excluded = |key: &str| exclusions.iter().any(|e| e.excludes(var, key));
        match var {
            _ if is_collection(var) => {
                let names = yields_names(var);
                for (pairs, code) in self.pairs(var) {
                    for (index, (k, v)) in pairs.iter().enumerate() {
                        if !target.selector.matches(k) || excluded(k) {
                            continue;
                        }
                        let value = if names {
                            Cow::Borrowed(k.as_bytes())
                        } else {
                            Cow::Borrowed(v.as_slice())
                        };
                        f(Item {
                            var,
                            key: Cow::Borrowed(k),
                            value,
                            slot: code.and_then(|c| member_slot(c, names, index)),
                        });
                    }
                }
            }
            // `!REQUEST_FILENAME` (or a ctl removing it) drops a scalar target entirely.
            _ if excluded("") => {}
            _ => {
                if let Some(value) = self.scalar(var) {
                    f(Item {
                        var,
                        key: Cow::Borrowed(""),
                        value,
                        slot: scalar_slot(var),
                    });
                }
            }
        }
    }

    /// The value a macro such as `%{tx.score}` or `%{request_headers.host}` names.
    pub(crate) fn macro_value(&self, var: VarName, key: Option<&str>) -> Cow<'_, [u8]> {
        if var == VarName::Rule {
            return Cow::Owned(match key.map(str::to_ascii_lowercase).as_deref() {
                Some("id") => self.current_rule_id.to_string().into_bytes(),
                _ => Vec::new(),
            });
        }
        if var == VarName::Tx {
            // `Macro::parse` makes every `%{tx.x}` a `Part::Tx` (`Transaction::tx_value`);
            // this is a bare `%{tx}` or a hand-built part. TX keys are stored folded.
            let value = key.and_then(|k| self.tx.get(&k.to_ascii_lowercase()));
            return Cow::Borrowed(value.map_or(&b""[..], Vec::as_slice));
        }
        let target = Target {
            var,
            selector: key.map_or(Selector::All, |k| Selector::Key(k.to_string())),
            count: false,
        };
        if var == VarName::Xml {
            let (list, _) = self.xml_list(&target.selector);
            return Cow::Borrowed(list.first().map_or(&b""[..], Vec::as_slice));
        }
        let mut first = None;
        self.visit(&target, &[], &mut |item| {
            first.get_or_insert(item.value);
        });
        first.unwrap_or(Cow::Borrowed(b""))
    }
}
