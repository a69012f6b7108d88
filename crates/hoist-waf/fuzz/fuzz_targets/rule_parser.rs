//! Arbitrary configuration text through the SecLang parser and rule compiler: it must return
//! a rule set or a load error, never panic. `cargo fuzz run rule_parser` (nightly).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        // Includes resolve against a directory with nothing to include.
        let _ = hoist_waf::RuleSet::from_str(text, Path::new("/nonexistent/fuzz.conf"));
    }
});
