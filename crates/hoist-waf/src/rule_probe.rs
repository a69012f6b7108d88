//! Instructions per rule under callgrind (`--features rule-probe`; a pass-through otherwise).
//!
//! A callgrind profile shows functions, and most of a transaction is one function run on a
//! few dozen rules. `rule_profile`'s timers cost more than the cheap rules they time where
//! the clock is slow to read, and taking rules out of the set (`SecRuleRemoveById`) to see
//! what they cost also regroups the gate runs and leaps around them: ten CRS rules that read
//! headers a small GET lacks "cost" 6.5k instructions by removal and 4.3k by this probe.
//! Here each rule named in `HOIST_WAF_PROBE_IDS` (up to 128) is evaluated, its chain and its
//! actions, inside a function of its own (`rule_probe::pNNN`, NNN its place in the list), so
//! callgrind's inclusive cost of that function is the rule's; `bench/waf-rule-instructions.sh`
//! lists them. With `HOIST_WAF_PROBE_LIST` set, each rule that reaches evaluation prints
//! `rule-probe: <id>` to stderr, which is how the script finds a transaction's rules.

/// `probed!(id, expr)`: `expr`, the evaluation of rule `id`, inside that rule's probe
/// function (see the module comment); `expr` itself, as written, without the feature (a
/// closure there changed how the phase loop was compiled: +1.3k instructions per small GET).
#[cfg(feature = "rule-probe")]
macro_rules! probed {
    ($id:expr, $e:expr) => {
        crate::rule_probe::run($id, || $e)
    };
}
#[cfg(not(feature = "rule-probe"))]
macro_rules! probed {
    ($id:expr, $e:expr) => {
        $e
    };
}
pub(crate) use probed;

#[cfg(feature = "rule-probe")]
pub(crate) use probe::run;

#[cfg(feature = "rule-probe")]
mod probe {
    use std::sync::OnceLock;

    struct Config {
        ids: Vec<i64>,
        list: bool,
    }

    fn config() -> &'static Config {
        static CONFIG: OnceLock<Config> = OnceLock::new();
        CONFIG.get_or_init(|| Config {
            ids: std::env::var("HOIST_WAF_PROBE_IDS")
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|id| id.parse().ok())
                .collect(),
            list: std::env::var_os("HOIST_WAF_PROBE_LIST").is_some(),
        })
    }

    // Each function differs from the others (its number goes through `black_box`), or the
    // compiler would merge them into one and callgrind would see a single function.
    macro_rules! probes {
        ($($name:ident $n:literal)*) => {
            $(
                #[inline(never)]
                fn $name<R>(f: &mut dyn FnMut() -> R) -> R {
                    std::hint::black_box($n);
                    f()
                }
            )*

            pub(crate) fn run<R>(id: i64, mut f: impl FnMut() -> R) -> R {
                let config = config();
                if config.list {
                    eprintln!("rule-probe: {id}");
                }
                match config.ids.iter().position(|&x| x == id) {
                    $(Some($n) => $name(&mut f),)*
                    _ => f(),
                }
            }
        };
    }

    probes!(
        p000 0 p001 1 p002 2 p003 3 p004 4 p005 5 p006 6 p007 7 p008 8 p009 9 p010 10 p011 11
        p012 12 p013 13 p014 14 p015 15 p016 16 p017 17 p018 18 p019 19 p020 20 p021 21 p022 22
        p023 23 p024 24 p025 25 p026 26 p027 27 p028 28 p029 29 p030 30 p031 31 p032 32 p033 33
        p034 34 p035 35 p036 36 p037 37 p038 38 p039 39 p040 40 p041 41 p042 42 p043 43 p044 44
        p045 45 p046 46 p047 47 p048 48 p049 49 p050 50 p051 51 p052 52 p053 53 p054 54 p055 55
        p056 56 p057 57 p058 58 p059 59 p060 60 p061 61 p062 62 p063 63 p064 64 p065 65 p066 66
        p067 67 p068 68 p069 69 p070 70 p071 71 p072 72 p073 73 p074 74 p075 75 p076 76 p077 77
        p078 78 p079 79 p080 80 p081 81 p082 82 p083 83 p084 84 p085 85 p086 86 p087 87 p088 88
        p089 89 p090 90 p091 91 p092 92 p093 93 p094 94 p095 95 p096 96 p097 97 p098 98 p099 99
        p100 100 p101 101 p102 102 p103 103 p104 104 p105 105 p106 106 p107 107 p108 108 p109 109
        p110 110 p111 111 p112 112 p113 113 p114 114 p115 115 p116 116 p117 117 p118 118 p119 119
        p120 120 p121 121 p122 122 p123 123 p124 124 p125 125 p126 126 p127 127
    );
}
