//! Command-line parsing with the semantics of Go's `flag` package, which Fortio uses, so that
//! a `fortio load` command line works unchanged: `-c 4`, `-c=4`, `--c 4`, boolean flags as
//! `-k` or `-k=false` (never `-k false`), flags before the positional arguments, `--` ends the
//! flags, and the value parsers of Go (`strconv.ParseInt` base 0, `ParseFloat`, `ParseBool`,
//! `time.ParseDuration`).

use std::time::Duration;

/// Whether a flag takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Value,
}

/// One flag of the command line.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub name: &'static str,
    pub kind: Kind,
    /// Go's usage placeholder for the value ("int", "float", "duration", "string", "file").
    pub placeholder: &'static str,
    pub help: &'static str,
    /// Shown as "(default ...)" when not empty.
    pub default: &'static str,
}

/// What the command line said: flags in order (a repeated flag appears each time) and the
/// positional arguments.
#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    pub flags: Vec<(&'static str, String)>,
    pub args: Vec<String>,
}

impl Parsed {
    /// The last value given to `name` (Go keeps the last one).
    pub fn last(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value given to `name`, in order (for repeatable flags such as -H).
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.flags
            .iter()
            .filter(move |(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why parsing stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum FlagError {
    /// `-h` or `-help` was given (Go prints the usage and exits 0).
    Help,
    /// Go's message, e.g. "flag provided but not defined: -foo".
    Invalid(String),
}

/// Parses `args` (without the program or subcommand name) against `specs`.
pub fn parse(specs: &[Spec], args: &[String]) -> Result<Parsed, FlagError> {
    let mut parsed = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg.len() < 2 || !arg.starts_with('-') {
            break;
        }
        i += 1;
        let mut name = &arg[1..];
        if let Some(rest) = name.strip_prefix('-') {
            if rest.is_empty() {
                // "--" terminates the flags.
                break;
            }
            name = rest;
        }
        if name.is_empty() || name.starts_with('-') || name.starts_with('=') {
            return Err(FlagError::Invalid(format!("bad flag syntax: {arg}")));
        }
        let (name, inline_value) = match name.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (name, None),
        };
        let Some(spec) = specs.iter().find(|s| s.name == name) else {
            if name == "h" || name == "help" {
                return Err(FlagError::Help);
            }
            return Err(FlagError::Invalid(format!(
                "flag provided but not defined: -{name}"
            )));
        };
        let value = match (spec.kind, inline_value) {
            (Kind::Bool, Some(v)) => match parse_bool(&v) {
                Some(b) => b.to_string(),
                None => {
                    return Err(FlagError::Invalid(format!(
                        "invalid boolean value {v:?} for -{name}: parse error"
                    )))
                }
            },
            (Kind::Bool, None) => "true".to_string(),
            (Kind::Value, Some(v)) => v,
            (Kind::Value, None) => match args.get(i) {
                Some(v) => {
                    i += 1;
                    v.clone()
                }
                None => {
                    return Err(FlagError::Invalid(format!(
                        "flag needs an argument: -{name}"
                    )))
                }
            },
        };
        parsed.flags.push((spec.name, value));
    }
    parsed.args = args[i..].to_vec();
    Ok(parsed)
}

/// Go's flag usage listing (`flag.PrintDefaults`).
pub fn usage(specs: &[Spec]) -> String {
    let mut sorted: Vec<&Spec> = specs.iter().collect();
    sorted.sort_by_key(|s| s.name);
    let mut out = String::new();
    for s in sorted {
        out.push_str("  -");
        out.push_str(s.name);
        let one_line = s.kind == Kind::Bool && s.name.len() == 1;
        if !s.placeholder.is_empty() {
            out.push(' ');
            out.push_str(s.placeholder);
        }
        out.push_str(if one_line { "\t" } else { "\n    \t" });
        out.push_str(&s.help.replace('\n', "\n    \t"));
        if !s.default.is_empty() {
            out.push_str(" (default ");
            out.push_str(s.default);
            out.push(')');
        }
        out.push('\n');
    }
    out
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)`: optional sign, 0x/0o/0b/0 prefixes, `_` between
/// digits when a prefix is used.
pub fn parse_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string(), true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string(), true)
    } else {
        (10, lower, false)
    };
    if digits.is_empty() || (!prefixed && digits.contains('_')) {
        return None;
    }
    if digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let digits = digits.replace('_', "");
    let magnitude = i128::from_str_radix(&digits, radix).ok()?;
    let v = if neg { -magnitude } else { magnitude };
    i64::try_from(v).ok()
}

/// Go's `strconv.ParseFloat(s, 64)` for the forms people type (Rust's parser accepts the same
/// decimal and exponent forms, and "inf"/"nan").
pub fn parse_float(s: &str) -> Option<f64> {
    if s.is_empty() || s.contains('_') {
        return None;
    }
    s.parse::<f64>().ok()
}

/// Go's `time.ParseDuration`: a sequence of decimal numbers with units ns, us, µs, ms, s, m,
/// h ("1h30m", "1.5s", "300ms"); "0" alone is allowed. Negative durations are rejected (no
/// flag here accepts them).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total_ns: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..num_len];
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total_ns += value * unit;
    }
    if !total_ns.is_finite() || total_ns > 9.2e18 {
        return None;
    }
    Some(Duration::from_nanos(total_ns.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[Spec] = &[
        Spec {
            name: "c",
            kind: Kind::Value,
            placeholder: "int",
            help: "Number of connections",
            default: "4",
        },
        Spec {
            name: "k",
            kind: Kind::Bool,
            placeholder: "",
            help: "Do not verify certs",
            default: "",
        },
        Spec {
            name: "H",
            kind: Kind::Value,
            placeholder: "value",
            help: "Header",
            default: "",
        },
        Spec {
            name: "keepalive",
            kind: Kind::Bool,
            placeholder: "",
            help: "Keep connection alive",
            default: "true",
        },
    ];

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn go_forms_of_a_value_flag() {
        for form in [
            &["-c", "8", "url"][..],
            &["-c=8", "url"],
            &["--c", "8", "url"],
            &["--c=8", "url"],
        ] {
            let p = parse(SPECS, &args(form)).unwrap();
            assert_eq!(p.last("c"), Some("8"), "{form:?}");
            assert_eq!(p.args, vec!["url"]);
        }
        // The value of a value flag may start with a dash.
        let p = parse(SPECS, &args(&["-H", "-x: y", "u"])).unwrap();
        assert_eq!(p.last("H"), Some("-x: y"));
    }

    #[test]
    fn bool_flags_never_take_the_next_argument() {
        let p = parse(SPECS, &args(&["-k", "false"])).unwrap();
        assert_eq!(p.last("k"), Some("true"));
        assert_eq!(p.args, vec!["false"]);
        let p = parse(SPECS, &args(&["-keepalive=false", "-k=1", "u"])).unwrap();
        assert_eq!(p.last("keepalive"), Some("false"));
        assert_eq!(p.last("k"), Some("true"));
        assert_eq!(
            parse(SPECS, &args(&["-k=maybe"])),
            Err(FlagError::Invalid(
                "invalid boolean value \"maybe\" for -k: parse error".into()
            ))
        );
    }

    #[test]
    fn flags_stop_at_the_first_positional_or_double_dash() {
        let p = parse(SPECS, &args(&["-c", "2", "url", "-k"])).unwrap();
        assert_eq!(p.args, vec!["url", "-k"]);
        assert_eq!(p.last("k"), None);
        let p = parse(SPECS, &args(&["--", "-c"])).unwrap();
        assert_eq!(p.args, vec!["-c"]);
        // A lone "-" is a positional argument.
        let p = parse(SPECS, &args(&["-", "x"])).unwrap();
        assert_eq!(p.args, vec!["-", "x"]);
    }

    #[test]
    fn repeated_flags_keep_every_value_and_the_last_wins() {
        let p = parse(
            SPECS,
            &args(&["-H", "a: 1", "-H=b: 2", "-c", "1", "-c", "3"]),
        )
        .unwrap();
        assert_eq!(p.all("H").collect::<Vec<_>>(), vec!["a: 1", "b: 2"]);
        assert_eq!(p.last("c"), Some("3"));
    }

    #[test]
    fn errors_read_like_go() {
        assert_eq!(
            parse(SPECS, &args(&["-nope", "u"])),
            Err(FlagError::Invalid(
                "flag provided but not defined: -nope".into()
            ))
        );
        assert_eq!(
            parse(SPECS, &args(&["-c"])),
            Err(FlagError::Invalid("flag needs an argument: -c".into()))
        );
        assert_eq!(
            parse(SPECS, &args(&["---c", "1"])),
            Err(FlagError::Invalid("bad flag syntax: ---c".into()))
        );
        assert_eq!(
            parse(SPECS, &args(&["-=1"])),
            Err(FlagError::Invalid("bad flag syntax: -=1".into()))
        );
        assert_eq!(parse(SPECS, &args(&["-h"])), Err(FlagError::Help));
        assert_eq!(parse(SPECS, &args(&["--help"])), Err(FlagError::Help));
    }

    #[test]
    fn usage_lists_flags_like_print_defaults() {
        let u = usage(SPECS);
        assert!(
            u.contains("  -c int\n    \tNumber of connections (default 4)\n"),
            "{u}"
        );
        assert!(u.contains("  -k\tDo not verify certs\n"), "{u}");
        assert!(
            u.contains("  -keepalive\n    \tKeep connection alive (default true)\n"),
            "{u}"
        );
    }

    #[test]
    fn go_value_parsers() {
        assert_eq!(parse_int("42"), Some(42));
        assert_eq!(parse_int("-7"), Some(-7));
        assert_eq!(parse_int("0x1f"), Some(31));
        assert_eq!(parse_int("010"), Some(8));
        assert_eq!(parse_int("0b101"), Some(5));
        assert_eq!(parse_int("1_000"), None);
        assert_eq!(parse_int("0x1_000"), Some(4096));
        assert_eq!(parse_int("4.5"), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_float("0.001"), Some(0.001));
        assert_eq!(parse_float("1e3"), Some(1000.0));
        assert_eq!(parse_float("-1"), Some(-1.0));
        assert_eq!(parse_float("abc"), None);
        assert_eq!(parse_bool("T"), Some(true));
        assert_eq!(parse_bool("yes"), None);
        assert_eq!(parse_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_duration("10µs"), Some(Duration::from_micros(10)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration(""), None);
    }
}
