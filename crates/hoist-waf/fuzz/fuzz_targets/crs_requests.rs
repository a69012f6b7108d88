//! Arbitrary requests through the full Core Rule Set, with and without the engine's
//! shortcuts: the differential check of `request_variables` on the rules the shortcuts were
//! built for (constant plan and leaps, gates and gate runs, value classes, regex groups, byte
//! filters, length bounds). The setup is the CRS corpus test's (tests/crs.rs): base.conf,
//! detection only, every paranoia level's rules, then crs-setup.conf.example and
//! rules/*.conf from `HOIST_CRS_DIR` (default ../shared/crs next to the workspace). The input
//! is split as in `request_variables` (`common/request.rs`); the response carries the body
//! back as text/html so the RESPONSE-95x rules read it. Both rule sets must log the same
//! rules with the same lines and interrupt the same way.
//! `cargo fuzz run crs_requests` (nightly); seeds from the CRS corpus:
//! `python3 seeds_from_crs.py ../../../../shared/crs/tests corpus/crs_requests`.
#![no_main]

#[path = "../common/request.rs"]
mod request;

use hoist_waf::RuleSet;
use libfuzzer_sys::fuzz_target;
use request::outcome;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

const SETUP_900005: &str = "SecAction \"id:900005,phase:1,nolog,pass,ctl:ruleEngine=DetectionOnly,\
ctl:ruleRemoveById=910000,setvar:tx.blocking_paranoia_level=4,setvar:tx.crs_validate_utf8_encoding=1,\
setvar:tx.arg_name_length=100,setvar:tx.arg_length=400,setvar:tx.total_arg_length=64000,\
setvar:tx.max_num_args=255,setvar:tx.max_file_size=64100,setvar:tx.combined_file_sizes=65535\"";

fn crs_dir() -> PathBuf {
    match std::env::var_os("HOIST_CRS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/crs"),
    }
}

fn load(shortcuts: bool) -> Arc<RuleSet> {
    let crs = crs_dir();
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conf/base.conf");
    let text = format!(
        "Include {}\n{SETUP_900005}\nInclude {}\nInclude {}\n",
        base.display(),
        crs.join("crs-setup.conf.example").display(),
        crs.join("rules/*.conf").display()
    );
    let origin = crs.join("hoist-crs-fuzz.conf");
    let loaded = if shortcuts {
        RuleSet::from_str(&text, &origin)
    } else {
        RuleSet::from_str_without_shortcuts(&text, &origin)
    };
    match loaded {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("the CRS at {} does not load: {e}", crs.display()),
    }
}

fn rules() -> Arc<RuleSet> {
    static SET: OnceLock<Arc<RuleSet>> = OnceLock::new();
    SET.get_or_init(|| load(true)).clone()
}

fn reference() -> Arc<RuleSet> {
    static SET: OnceLock<Arc<RuleSet>> = OnceLock::new();
    SET.get_or_init(|| load(false)).clone()
}

fuzz_target!(|data: &[u8]| {
    let fast = request::run(rules(), data, |_| {});
    let plain = request::run(reference(), data, |_| {});
    assert_eq!(
        outcome(&fast),
        outcome(&plain),
        "the shortcuts changed the outcome"
    );
});
