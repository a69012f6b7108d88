//! One HTTP exchange through the rule set: feed the request line, headers and body, run the
//! phases, read the interruption and the matched-rule log.

use crate::actions::{BodyProcessor, EngineMode, IdRanges};
use crate::body::{self, Pairs, Xml};
use crate::captures::{Captures, HitCaptures};
use crate::collections::{XML_ATTRIBUTES_LIST, XML_TEXTS_LIST};
use crate::macros::{Macro, Part};
use crate::operators::Expand;
use crate::pair_list::PairList;
use crate::rules::RuleSet;
use crate::values::{scalar_slot, ValueCache};
use crate::variables::Exclusion;
use crate::variables::VarName;
use std::borrow::Cow;
use std::sync::Arc;

/// What the engine decided to do with the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interruption {
    pub status: u16,
    pub rule_id: i64,
    /// `deny`, `drop` or `redirect`.
    pub action: &'static str,
    pub redirect: Option<String>,
}

/// A rule (or chain) that matched, with its log line in ModSecurity's error-log form.
///
/// A `nolog` rule's record is 16 bytes with nothing behind it: CRS's bookkeeping rules (the
/// setup's defaults, every file's paranoia-level skips, the score checks) match ~90 times in
/// each benign request, and pushing, copying (the constant block's) and dropping records with
/// four empty strings was ~3 % of a small GET.
#[derive(Debug, Clone)]
pub struct MatchedRule {
    pub id: i64,
    pub phase: u8,
    pub severity: Option<u8>,
    /// What a logged rule writes; `None` for `nolog` rules.
    entry: Option<Box<LogEntry>>,
}

/// The logged part of a [`MatchedRule`].
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub message: String,
    pub data: String,
    pub tags: Vec<String>,
    pub log_line: String,
}

impl MatchedRule {
    pub(crate) fn new(id: i64, phase: u8, severity: Option<u8>, entry: Option<LogEntry>) -> Self {
        MatchedRule {
            id,
            phase,
            severity,
            entry: entry.map(Box::new),
        }
    }

    /// false for `nolog` rules: they matched but are not written to the log, and have no
    /// message, data, tags or log line.
    pub fn logged(&self) -> bool {
        self.entry.is_some()
    }

    pub fn message(&self) -> &str {
        self.entry.as_ref().map_or("", |e| &e.message)
    }

    pub fn data(&self) -> &str {
        self.entry.as_ref().map_or("", |e| &e.data)
    }

    pub fn tags(&self) -> &[String] {
        self.entry.as_ref().map_or(&[], |e| &e.tags)
    }

    pub fn log_line(&self) -> &str {
        self.entry.as_ref().map_or("", |e| &e.log_line)
    }
}

pub(crate) enum RemovedTarget {
    Ids(IdRanges, Exclusion),
    /// The tag, its `heads::tag_bit`, and what is removed.
    Tag(String, u64, Exclusion),
}

use crate::tx_name::TxName;
pub(crate) use crate::tx_vars::TxMap;
use crate::tx_vars::TxVars;

pub struct Transaction {
    pub(crate) rules: Arc<RuleSet>,
    pub(crate) engine: EngineMode,
    pub(crate) remote_addr: String,
    pub(crate) unique_id: String,
    pub(crate) method: String,
    pub(crate) uri: String,
    pub(crate) uri_raw: String,
    pub(crate) filename: String,
    pub(crate) query: String,
    pub(crate) protocol: String,
    /// REQUEST_LINE, built once: a dozen CRS rules read it.
    pub(crate) request_line: String,
    pub(crate) args_get: PairList,
    pub(crate) args_post: PairList,
    pub(crate) cookies: PairList,
    pub(crate) request_headers: PairList,
    pub(crate) request_body: Vec<u8>,
    pub(crate) request_body_visible: bool,
    pub(crate) request_body_truncated: bool,
    pub(crate) body_processor: Option<BodyProcessor>,
    pub(crate) force_body_variable: bool,
    pub(crate) request_body_access: bool,
    pub(crate) reqbody_error: Option<String>,
    pub(crate) files: Pairs,
    pub(crate) file_sizes: Vec<usize>,
    pub(crate) multipart_part_headers: Pairs,
    pub(crate) multipart_strict_error: bool,
    pub(crate) multipart_unmatched_boundary: bool,
    pub(crate) xml: Xml,
    pub(crate) tx: TxVars,
    /// The previous transaction's TX, to be rewritten by `replay` (see `scratch`); never read.
    pub(crate) last_tx: TxVars,
    pub(crate) response_status: u16,
    pub(crate) response_protocol: String,
    pub(crate) response_headers: PairList,
    pub(crate) response_body: Vec<u8>,
    /// MATCHED_VARS of the last rule that matched; its last member is MATCHED_VAR (while a
    /// rule's actions run per matching variable, the variable they run for).
    pub(crate) matched_vars: PairList,
    /// The variables the rule being evaluated matched (name, transformed value), and per
    /// match the captures it produced; kept from rule to rule for their buffers.
    pub(crate) hits: PairList,
    /// `None` only while a rule's evaluation holds them.
    pub(crate) hit_captures: Option<HitCaptures>,
    /// The operator's groups for the value being evaluated (`capture`).
    pub(crate) captures: Option<Captures>,
    pub(crate) current_rule_id: i64,
    pub(crate) empty: Pairs,
    pub(crate) removed_ids: IdRanges,
    pub(crate) removed_tags: Vec<String>,
    /// `heads::tag_bit` of each removed tag, OR-ed.
    pub(crate) removed_tag_bits: u64,
    pub(crate) removed_targets: Vec<RemovedTarget>,
    pub(crate) interruption: Option<Interruption>,
    /// `allow` stops rule processing for the remaining request/response phases.
    pub(crate) allowed: bool,
    pub(crate) matched: Vec<MatchedRule>,
    pub(crate) phases_done: u8,
    /// Transformed values (and prefilter hits) of the request's stable values. Boxed: rule
    /// evaluation moves it out while targets borrow the transaction (`take_values`), and
    /// moving a pointer is cheaper than moving the cache, hundreds of times per request.
    /// `None` only while moved out.
    pub(crate) values: Option<Box<ValueCache>>,
    /// Which prefiltered rules can match at all, until a value changes (see `gates`).
    pub(crate) gate_cache: crate::gates::GateCache,
    /// A spare buffer for `setvar` values (see `apply_effect`).
    pub(crate) setvar_buf: Vec<u8>,
    /// Where `setvar` expands a name with macros.
    pub(crate) setvar_name: Vec<u8>,
    /// Off only in the probe that works out the rule set's constant plan.
    pub(crate) use_constant_plan: bool,
    /// TX holds the constant block's state, untouched but by rules (see `constant`).
    pub(crate) constant_tx: bool,
}

impl Expand for Transaction {
    fn expand<'a>(&'a self, m: &'a Macro) -> Cow<'a, str> {
        if let Some(lit) = m.as_literal() {
            return Cow::Borrowed(lit);
        }
        // The common CRS case, `%{tx.some_score}` alone: borrow the value, no string built.
        if let [Part::Tx(key)] = m.parts.as_slice() {
            if let Ok(text) = std::str::from_utf8(self.tx_value(key)) {
                return Cow::Borrowed(text);
            }
        }
        let mut out = String::new();
        for part in &m.parts {
            match part {
                Part::Literal(s) => out.push_str(s),
                Part::Tx(key) => out.push_str(&String::from_utf8_lossy(self.tx_value(key))),
                Part::Var(var, key) => out.push_str(&String::from_utf8_lossy(
                    &self.macro_value(*var, key.as_deref()),
                )),
            }
        }
        Cow::Owned(out)
    }

    fn expand_bytes<'a>(&'a self, m: &'a Macro) -> Cow<'a, [u8]> {
        if let Some(lit) = m.as_literal() {
            return Cow::Borrowed(lit.as_bytes());
        }
        // `%{tx.some_score}` alone (CRS's thresholds, 920450's restricted header list):
        // borrowed as stored, with no UTF-8 check.
        if let [Part::Tx(key)] = m.parts.as_slice() {
            return Cow::Borrowed(self.tx_value(key));
        }
        let mut out = Vec::new();
        self.expand_into(m, &mut out);
        Cow::Owned(out)
    }
}

impl Transaction {
    /// What `%{tx.key}` expands to: the value, empty when the variable is not set.
    fn tx_value(&self, key: &TxName) -> &[u8] {
        self.tx.get_named(key).map_or(&[], Vec::as_slice)
    }

    /// `expand_bytes`, appended to `out`: the values' bytes as they are (setvar's values;
    /// a name is made text by its caller).
    pub(crate) fn expand_into(&self, m: &Macro, out: &mut Vec<u8>) {
        for part in &m.parts {
            match part {
                Part::Literal(s) => out.extend_from_slice(s.as_bytes()),
                Part::Tx(key) => out.extend_from_slice(self.tx_value(key)),
                Part::Var(var, key) => {
                    out.extend_from_slice(&self.macro_value(*var, key.as_deref()))
                }
            }
        }
    }
}

impl Drop for Transaction {
    /// Hands the working memory to the next transaction of the rule set (see `scratch`).
    fn drop(&mut self) {
        if let Some(values) = self.values.take() {
            // This TX becomes the next one's `last_tx`; the older one, cleared, its TX.
            let mut last_tx = std::mem::take(&mut self.last_tx);
            last_tx.clear();
            self.rules.scratch.give(crate::scratch::Scratch {
                values,
                gate_cache: std::mem::take(&mut self.gate_cache),
                tx: last_tx,
                last_tx: std::mem::take(&mut self.tx),
                matched_vars: std::mem::take(&mut self.matched_vars),
                hits: std::mem::take(&mut self.hits),
                hit_captures: self.hit_captures.take().unwrap_or_default(),
                captures: self.captures.take().unwrap_or_default(),
                lists: crate::scratch::Lists {
                    args_get: std::mem::take(&mut self.args_get),
                    args_post: std::mem::take(&mut self.args_post),
                    cookies: std::mem::take(&mut self.cookies),
                    request_headers: std::mem::take(&mut self.request_headers),
                    response_headers: std::mem::take(&mut self.response_headers),
                },
                matched: std::mem::take(&mut self.matched),
                setvar_buf: std::mem::take(&mut self.setvar_buf),
                setvar_name: std::mem::take(&mut self.setvar_name),
            });
        }
    }
}

impl Transaction {
    pub fn new(rules: Arc<RuleSet>, remote_addr: &str, unique_id: &str) -> Transaction {
        let scratch = rules.scratch.take();
        let rules_shortcuts = rules.shortcuts;
        Transaction {
            engine: rules.engine,
            request_body_access: rules.request_body_access,
            rules,
            remote_addr: remote_addr.to_string(),
            unique_id: unique_id.to_string(),
            method: String::new(),
            uri: String::new(),
            uri_raw: String::new(),
            filename: String::new(),
            query: String::new(),
            protocol: String::new(),
            request_line: String::new(),
            args_get: scratch.lists.args_get,
            args_post: scratch.lists.args_post,
            cookies: scratch.lists.cookies,
            request_headers: scratch.lists.request_headers,
            request_body: Vec::new(),
            request_body_visible: false,
            request_body_truncated: false,
            body_processor: None,
            force_body_variable: false,
            reqbody_error: None,
            files: Vec::new(),
            file_sizes: Vec::new(),
            multipart_part_headers: Vec::new(),
            multipart_strict_error: false,
            multipart_unmatched_boundary: false,
            xml: Xml::default(),
            tx: scratch.tx,
            last_tx: scratch.last_tx,
            response_status: 0,
            response_protocol: String::new(),
            response_headers: scratch.lists.response_headers,
            response_body: Vec::new(),
            matched_vars: scratch.matched_vars,
            hits: scratch.hits,
            hit_captures: Some(scratch.hit_captures),
            captures: Some(scratch.captures),
            current_rule_id: 0,
            empty: Vec::new(),
            removed_ids: Vec::new(),
            removed_tags: Vec::new(),
            removed_tag_bits: 0,
            removed_targets: Vec::new(),
            interruption: None,
            allowed: false,
            matched: scratch.matched,
            phases_done: 0,
            values: Some(scratch.values),
            gate_cache: scratch.gate_cache,
            setvar_buf: scratch.setvar_buf,
            setvar_name: scratch.setvar_name,
            use_constant_plan: rules_shortcuts,
            constant_tx: false,
        }
    }

    /// The request line as received: `uri` is the request target (origin or absolute form).
    pub fn process_request_line(&mut self, method: &str, uri: &str, protocol: &str) {
        self.gate_cache.changed();
        self.values_mut().clear();
        self.method = method.to_string();
        self.protocol = protocol.to_string();
        self.uri_raw = uri.to_string();
        // Not format!: its machinery cost ~900 instructions per request for three pieces.
        let mut line = String::with_capacity(method.len() + uri.len() + protocol.len() + 2);
        for (i, piece) in [method, uri, protocol].into_iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            line.push_str(piece);
        }
        self.request_line = line;
        // REQUEST_URI never carries scheme and authority, even for absolute-form targets.
        let mut rel = uri;
        if let Some(after) = uri.split_once("://").map(|(_, a)| a) {
            if !uri.starts_with('/') {
                rel = after.find('/').map_or("/", |i| &after[i..]);
            }
        }
        let rel = rel.split('#').next().unwrap_or("");
        self.uri = rel.to_string();
        let (path, query) = rel.split_once('?').unwrap_or((rel, ""));
        self.filename = path.to_string();
        self.query = query.to_string();
        // SecArgumentsLimit: a 60 KiB request line holds thousands of arguments, each
        // inspected by every ARGS rule (about 10 ms of CPU per thousand under CRS). One more
        // than the limit is parsed, so that a rule can tell a query over it (base.conf's
        // 200005 refuses those); the rest stay in QUERY_STRING and REQUEST_URI only.
        let limit = self.rules.arguments_limit.saturating_add(1);
        body::parse_urlencoded(query.as_bytes(), &mut self.args_get, limit);
    }

    pub fn add_request_header(&mut self, name: &str, value: &[u8]) {
        self.gate_cache.changed();
        if name.eq_ignore_ascii_case("cookie") {
            body::parse_cookies(value, &mut self.cookies);
        }
        self.request_headers.push(name, value);
    }

    pub(crate) fn request_header(&self, name: &str) -> Option<&[u8]> {
        self.request_headers
            .as_slice()
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// Phase 1. As in ModSecurity, REQBODY_PROCESSOR is already known here (from the
    /// Content-Type) so phase-1 rules can test it; `ctl:requestBodyProcessor` overrides it.
    pub fn process_request_headers(&mut self) -> Option<&Interruption> {
        if self.body_processor.is_none() {
            self.body_processor = self.processor_for_content_type();
        }
        self.reserve_values();
        self.run_phase(1);
        self.interruption.as_ref()
    }

    /// Sizes the value cache for the values known now (names and values of arguments,
    /// cookies, headers, plus the scalars), so the first rules to touch each value do not
    /// grow it by repeated reallocation and copying.
    fn reserve_values(&mut self) {
        let members = self.args_get.len()
            + self.args_post.len()
            + self.cookies.len()
            + self.request_headers.len()
            + self.files.len();
        let rules = &self.rules;
        let words = rules.prefilter().map_or(0, |p| p.words());
        let chains = rules.chains.len();
        self.values_mut().reserve(2 * members + 10, chains, words);
    }

    /// Buffers body bytes up to SecRequestBodyLimit; returns false once the limit is passed
    /// (with `SecRequestBodyLimitAction Reject` the transaction is then interrupted with 413).
    pub fn append_request_body(&mut self, chunk: &[u8]) -> bool {
        self.gate_cache.changed();
        self.invalidate_scalar(VarName::RequestBody);
        let room = self
            .rules
            .request_body_limit
            .saturating_sub(self.request_body.len());
        if chunk.len() > room {
            self.request_body.extend_from_slice(&chunk[..room]);
            self.request_body_truncated = true;
            self.over_body_limit(self.rules.request_body_limit_reject, 413);
            return false;
        }
        self.request_body.extend_from_slice(chunk);
        true
    }

    /// Runs the body processor, then phase 2.
    pub fn process_request_body(&mut self) -> Option<&Interruption> {
        if self.phases_done < 1 {
            self.run_phase(1);
        }
        if self.request_body_access {
            self.parse_request_body();
            self.reserve_values();
        }
        self.run_phase(2);
        self.interruption.as_ref()
    }

    fn processor_for_content_type(&self) -> Option<BodyProcessor> {
        let lower = self.request_header("content-type")?.to_ascii_lowercase();
        if lower.starts_with(b"application/x-www-form-urlencoded") {
            Some(BodyProcessor::UrlEncoded)
        } else if lower.starts_with(b"multipart/form-data") {
            Some(BodyProcessor::Multipart)
        } else {
            None
        }
    }

    fn parse_request_body(&mut self) {
        let content_type = self
            .request_header("content-type")
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        if self.body_processor.is_none() {
            self.body_processor = self.processor_for_content_type();
        }
        let body = std::mem::take(&mut self.request_body);
        // SecArgumentsLimit: a peer decides how many arguments a body holds, and each costs
        // memory and rule work; past the limit the body is a REQBODY_ERROR, as in ModSecurity.
        let limit = self.rules.arguments_limit;
        if !body.is_empty() || self.body_processor.is_some() {
            // Arguments, files, XML or REQUEST_BODY appear now.
            self.gate_cache.changed();
        } else if self.force_body_variable {
            // Only REQUEST_BODY appears, empty (CRS 901340 forces it on every GET): the rest
            // of phase 1's unions hold in phase 2.
            self.gate_cache.forget(&self.rules.request_body_readers);
        }
        match self.body_processor {
            Some(BodyProcessor::UrlEncoded) => {
                if !body::parse_urlencoded(&body, &mut self.args_post, limit) {
                    self.reqbody_error = Some(format!("urlencoded: more than {limit} arguments"));
                }
                self.request_body_visible = true;
            }
            Some(BodyProcessor::Multipart) => match body::boundary_of(&content_type) {
                None => self.reqbody_error = Some("multipart: no boundary in Content-Type".into()),
                Some(boundary) => {
                    let m = body::parse_multipart(&body, &boundary, limit);
                    for (name, value) in &m.args {
                        self.args_post.push(name, value);
                    }
                    self.files.extend(m.files);
                    self.file_sizes.extend(m.file_sizes);
                    self.multipart_part_headers.extend(m.part_headers);
                    self.multipart_strict_error = m.strict_error;
                    self.multipart_unmatched_boundary = m.unmatched_boundary;
                    if let Some(e) = m.error {
                        self.reqbody_error = Some(e);
                    }
                }
            },
            Some(BodyProcessor::Json) if !body.is_empty() => {
                if let Err(e) = crate::json::parse_json(&body, &mut self.args_post, limit) {
                    self.reqbody_error = Some(e);
                }
            }
            Some(BodyProcessor::Json) => {}
            Some(BodyProcessor::Xml) => match body::parse_xml(&body) {
                Ok(x) => {
                    self.xml = x;
                    self.values_mut().invalidate_list(XML_TEXTS_LIST);
                    self.values_mut().invalidate_list(XML_ATTRIBUTES_LIST);
                }
                Err(e) => self.reqbody_error = Some(e),
            },
            None => {}
        }
        if self.force_body_variable {
            self.request_body_visible = true;
        }
        self.request_body = body;
    }

    pub fn set_response_status(&mut self, status: u16, protocol: &str) {
        self.gate_cache.changed();
        self.response_status = status;
        self.response_protocol = protocol.to_string();
    }

    pub fn add_response_header(&mut self, name: &str, value: &[u8]) {
        self.gate_cache.changed();
        self.response_headers.push(name, value);
    }

    /// Phase 3.
    pub fn process_response_headers(&mut self) -> Option<&Interruption> {
        self.run_phase(3);
        self.interruption.as_ref()
    }

    /// Whether the response body should be buffered for phase 4 (SecResponseBodyAccess and
    /// a Content-Type in SecResponseBodyMimeType).
    pub fn wants_response_body(&self) -> bool {
        if !self.rules.response_body_access {
            return false;
        }
        // Asked several times per response (by the proxy's filter chain and the WAF filter):
        // compared in place, nothing allocated.
        let ct = self
            .response_headers
            .as_slice()
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            .map_or(&[][..], |(_, v)| &v[..]);
        let mime = ct
            .split(|&b| b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        self.rules
            .response_mime_types
            .iter()
            .any(|m| m.as_bytes().eq_ignore_ascii_case(mime))
    }

    /// Appends to the response body up to SecResponseBodyLimit; past it, with
    /// SecResponseBodyLimitAction Reject (ModSecurity's default) and the engine on, the
    /// transaction is interrupted with 500, as ModSecurity answers a response too large to
    /// inspect. False when the chunk did not fit.
    pub fn append_response_body(&mut self, chunk: &[u8]) -> bool {
        self.gate_cache.changed();
        self.invalidate_scalar(VarName::ResponseBody);
        let room = self
            .rules
            .response_body_limit
            .saturating_sub(self.response_body.len());
        if chunk.len() > room {
            self.response_body.extend_from_slice(&chunk[..room]);
            self.over_body_limit(self.rules.response_body_limit_reject, 500);
            return false;
        }
        self.response_body.extend_from_slice(chunk);
        true
    }

    /// A body went past its limit: with the limit action Reject and the engine on, the
    /// transaction is interrupted with `status` (no rule: id 0).
    fn over_body_limit(&mut self, reject: bool, status: u16) {
        if reject && self.engine == EngineMode::On {
            self.interruption.get_or_insert(Interruption {
                status,
                rule_id: 0,
                action: "deny",
                redirect: None,
            });
        }
    }

    /// Phase 4.
    pub fn process_response_body(&mut self) -> Option<&Interruption> {
        self.run_phase(4);
        self.interruption.as_ref()
    }

    /// Phase 5.
    pub fn process_logging(&mut self) {
        self.run_phase(5);
    }

    fn values_mut(&mut self) -> &mut ValueCache {
        self.values.get_or_insert_with(Box::default)
    }

    fn invalidate_scalar(&mut self, var: VarName) {
        if let Some(slot) = scalar_slot(var) {
            self.values_mut().invalidate(slot);
        }
    }

    pub fn interruption(&self) -> Option<&Interruption> {
        self.interruption.as_ref()
    }

    /// Whether this transaction took the constant block's TX as worked out at load (see
    /// `constant`) instead of evaluating its rules; for tests.
    #[doc(hidden)]
    pub fn replayed_constant_block(&self) -> bool {
        self.constant_tx
    }

    pub fn matched_rules(&self) -> &[MatchedRule] {
        &self.matched
    }

    /// A TX variable, for tests and the proxy's logs (`tx.blocking_inbound_anomaly_score`).
    pub fn tx_var(&self, name: &str) -> Option<&[u8]> {
        self.tx.get(&name.to_ascii_lowercase()).map(Vec::as_slice)
    }

    pub fn set_tx_var(&mut self, name: &str, value: &[u8]) {
        // The constant plan's decisions assume only rules write TX.
        self.constant_tx = false;
        self.tx.set(&name.to_ascii_lowercase(), value);
    }

    pub fn engine(&self) -> EngineMode {
        self.engine
    }

    pub(crate) fn client(&self) -> &str {
        &self.remote_addr
    }

    pub(crate) fn request_uri(&self) -> &str {
        &self.uri
    }

    /// Whether phase 2 wants the request body (SecRequestBodyAccess, or ctl:requestBodyAccess).
    pub fn request_body_access(&self) -> bool {
        self.request_body_access
    }

    /// SecRequestBodyLimit: how much body a proxy should buffer for `append_request_body`.
    pub fn request_body_limit(&self) -> usize {
        self.rules.request_body_limit
    }

    /// Whether a request body past SecRequestBodyLimit is inspected up to the limit and let
    /// through (SecRequestBodyLimitAction ProcessPartial, or any action while the engine is
    /// not On: ModSecurity 2 rejects only with the engine On; Coraza's transaction answers
    /// 413 in DetectionOnly too), rather than refused with 413 (`append_request_body`
    /// interrupts then).
    pub fn request_body_partial(&self) -> bool {
        !self.rules.request_body_limit_reject || self.engine != EngineMode::On
    }

    /// SecResponseBodyLimit: how much of the response body phase 4 sees.
    pub fn response_body_limit(&self) -> usize {
        self.rules.response_body_limit
    }

    /// Whether the body was cut at SecRequestBodyLimit.
    pub fn request_body_truncated(&self) -> bool {
        self.request_body_truncated
    }
}
