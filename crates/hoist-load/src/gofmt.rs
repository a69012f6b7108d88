//! Go's number and duration formatting (`%g`, `%.Ng`, `time.Duration.String`), so that the
//! text report reads byte for byte like Fortio's and people can diff the two.
//!
//! The digit generation comes from Rust's own exact float formatting (shortest round-trip
//! digits for `%g`, correctly rounded with ties to even for `%.Ng`, as Go does); only the
//! layout rules, which is where Go differs from C's printf, are ported from Go's
//! `strconv/ftoa.go` (`formatDigits`, `fmtE`, `fmtF`).

use std::time::Duration;

/// Decimal digits of a finite number: value = 0.d[0]d[1]... x 10^dp. No leading zeros; zero
/// has no digits.
struct Digits {
    d: Vec<u8>,
    dp: i32,
}

impl Digits {
    /// Parses Rust's `{:e}` output ("1.0485897e7", "5e-1", "0e0") into digits.
    fn from_exp_form(s: &str, trim_zeros: bool) -> Digits {
        let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let mut d: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
        if trim_zeros {
            while d.last() == Some(&b'0') {
                d.pop();
            }
        }
        if d.iter().all(|&c| c == b'0') {
            return Digits {
                d: Vec::new(),
                dp: 0,
            };
        }
        Digits { d, dp: exp + 1 }
    }

    fn nd(&self) -> i32 {
        i32::try_from(self.d.len()).unwrap_or(i32::MAX)
    }
}

/// Go's `%g`: the shortest representation that round-trips, in exponent form when the
/// exponent is below -4 or at least 6 (`1.0485897e+07`, `0.000123`, `1e-05`).
pub fn g(v: f64) -> String {
    if let Some(s) = special(v) {
        return s;
    }
    let digits = Digits::from_exp_form(&format!("{:e}", v.abs()), false);
    let prec = digits.nd();
    format_g(v.is_sign_negative(), &digits, prec, true)
}

/// Go's `%.Ng`: at most `precision` significant digits, trailing zeros removed.
pub fn g_prec(v: f64, precision: usize) -> String {
    if let Some(s) = special(v) {
        return s;
    }
    let precision = precision.max(1);
    let digits = Digits::from_exp_form(&format!("{:.*e}", precision - 1, v.abs()), true);
    let prec = i32::try_from(precision).unwrap_or(i32::MAX);
    format_g(v.is_sign_negative(), &digits, prec, false)
}

/// Go's `%.Nf` (Rust's fixed formatting rounds the exact binary value with ties to even, as
/// Go does).
pub fn f(v: f64, precision: usize) -> String {
    if let Some(s) = special(v) {
        return s;
    }
    format!("{v:.precision$}")
}

fn special(v: f64) -> Option<String> {
    if v.is_nan() {
        Some("NaN".to_string())
    } else if v.is_infinite() {
        Some(if v > 0.0 { "+Inf" } else { "-Inf" }.to_string())
    } else {
        None
    }
}

/// Go's `formatDigits` for the 'g' verb.
fn format_g(neg: bool, digs: &Digits, mut prec: i32, shortest: bool) -> String {
    let mut eprec = prec;
    if eprec > digs.nd() && digs.nd() >= digs.dp {
        eprec = digs.nd();
    }
    if shortest {
        eprec = 6;
    }
    let exp = digs.dp - 1;
    if exp < -4 || exp >= eprec {
        if prec > digs.nd() {
            prec = digs.nd();
        }
        return fmt_e(neg, digs, prec - 1);
    }
    if prec > digs.dp {
        prec = digs.nd();
    }
    fmt_f(neg, digs, (prec - digs.dp).max(0))
}

/// Go's `fmtE`: d.ddddde±dd.
fn fmt_e(neg: bool, digs: &Digits, prec: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    out.push(digs.d.first().map_or('0', |&c| char::from(c)));
    if prec > 0 {
        out.push('.');
        for i in 1..=prec {
            let c = usize::try_from(i).ok().and_then(|i| digs.d.get(i));
            out.push(c.map_or('0', |&c| char::from(c)));
        }
    }
    out.push('e');
    let mut exp = if digs.d.is_empty() { 0 } else { digs.dp - 1 };
    if exp < 0 {
        out.push('-');
        exp = -exp;
    } else {
        out.push('+');
    }
    if exp < 10 {
        out.push('0');
    }
    out.push_str(&exp.to_string());
    out
}

/// Go's `fmtF`: ddd.ddd with `prec` fraction digits.
fn fmt_f(neg: bool, digs: &Digits, prec: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if digs.dp > 0 {
        for i in 0..digs.dp {
            let c = usize::try_from(i).ok().and_then(|i| digs.d.get(i));
            out.push(c.map_or('0', |&c| char::from(c)));
        }
    } else {
        out.push('0');
    }
    if prec > 0 {
        out.push('.');
        for i in 0..prec {
            let j = digs.dp + i;
            let c = usize::try_from(j).ok().and_then(|j| digs.d.get(j));
            out.push(c.map_or('0', |&c| char::from(c)));
        }
    }
    out
}

/// Go's `time.Duration.String`: "5s", "1.5s", "970.755702ms", "12µs", "1m0.5s", "2h0m0s".
pub fn duration(d: Duration) -> String {
    let u = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    if u == 0 {
        return "0s".to_string();
    }
    if u < 1_000_000_000 {
        let (unit, prec) = if u < 1_000 {
            ("ns", 0)
        } else if u < 1_000_000 {
            ("µs", 3)
        } else {
            ("ms", 6)
        };
        let (int, frac) = split_fraction(u, prec);
        return format!("{int}{frac}{unit}");
    }
    let (secs, frac) = split_fraction(u, 9);
    let (s, mins) = (secs % 60, secs / 60);
    if mins == 0 {
        return format!("{s}{frac}s");
    }
    let (m, hours) = (mins % 60, mins / 60);
    if hours == 0 {
        return format!("{m}m{s}{frac}s");
    }
    format!("{hours}h{m}m{s}{frac}s")
}

/// Splits `v` into `v / 10^prec` and the fraction as ".ddd" without trailing zeros (empty
/// when the fraction is zero), like Go's `fmtFrac`.
fn split_fraction(v: u64, prec: u32) -> (u64, String) {
    let scale = 10u64.pow(prec);
    let (int, frac) = (v / scale, v % scale);
    if frac == 0 {
        return (int, String::new());
    }
    let digits = format!("{frac:0width$}", width = prec as usize);
    (int, format!(".{}", digits.trim_end_matches('0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected strings are what Go's fmt prints for the same values (checked against the Go
    // rules: %g switches to exponent form below 1e-4 and from 1e+06 for shortest output, and
    // from 10^precision for %.Ng).
    #[test]
    fn shortest_g() {
        assert_eq!(g(0.0), "0");
        assert_eq!(g(1.0), "1");
        assert_eq!(g(0.000887051), "0.000887051");
        assert_eq!(g(2.7697e-05), "2.7697e-05");
        assert_eq!(g(10485897.0), "1.0485897e+07");
        assert_eq!(g(999999.0), "999999");
        assert_eq!(g(1_000_000.0), "1e+06");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(0.00001), "1e-05");
        assert_eq!(g(-10.5), "-10.5");
        assert_eq!(g(1e100), "1e+100");
        assert_eq!(g(123456.5), "123456.5");
        assert_eq!(g(f64::NAN), "NaN");
        assert_eq!(g(f64::INFINITY), "+Inf");
    }

    #[test]
    fn precision_g() {
        // Lines from Fortio's README, with the values that produced them.
        assert_eq!(g_prec(4.9404876e-05, 8), "4.9404876e-05");
        assert_eq!(g_prec(1.145e-05, 4), "1.145e-05");
        assert_eq!(g_prec(4.94048763, 9), "4.94048763");
        assert_eq!(g_prec(0.0605556, 6), "0.0605556");
        assert_eq!(g_prec(80495.0, 5), "80495");
        assert_eq!(g_prec(103012.5, 5), "1.0301e+05");
        assert_eq!(g_prec(7.9056, 5), "7.9056");
        // Trailing zeros go, and so does a bare decimal point.
        assert_eq!(g_prec(12.0, 4), "12");
        assert_eq!(g_prec(0.5, 4), "0.5");
        assert_eq!(g_prec(100000.0, 6), "100000");
        assert_eq!(g_prec(1_000_000.0, 6), "1e+06");
        assert_eq!(g_prec(0.0, 8), "0");
        assert_eq!(g_prec(690.475, 8), "690.475");
        assert_eq!(g_prec(15.77, 4), "15.77");
        assert_eq!(g_prec(12565.2, 8), "12565.2");
        assert_eq!(g_prec(301.912, 4), "301.9");
        // Rounding carries into a new digit.
        assert_eq!(g_prec(9.99999, 4), "10");
        assert_eq!(g_prec(99999.9, 5), "1e+05");
        assert_eq!(g_prec(-0.00012345, 3), "-0.000123");
    }

    #[test]
    fn fixed_f() {
        assert_eq!(f(100.0, 2), "100.00");
        assert_eq!(f(47.5, 2), "47.50");
        assert_eq!(f(60.588, 3), "60.588");
        assert_eq!(f(6.25, 1), "6.2");
        assert_eq!(f(0.125, 2), "0.12");
    }

    #[test]
    fn go_durations() {
        assert_eq!(duration(Duration::from_secs(5)), "5s");
        assert_eq!(
            duration(Duration::from_nanos(5_059_691_387)),
            "5.059691387s"
        );
        assert_eq!(duration(Duration::from_nanos(970_755_702)), "970.755702ms");
        assert_eq!(duration(Duration::from_millis(100)), "100ms");
        assert_eq!(duration(Duration::from_micros(12)), "12µs");
        assert_eq!(duration(Duration::from_nanos(1500)), "1.5µs");
        assert_eq!(duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(duration(Duration::ZERO), "0s");
        assert_eq!(duration(Duration::from_millis(60_500)), "1m0.5s");
        assert_eq!(duration(Duration::from_secs(7200)), "2h0m0s");
        assert_eq!(duration(Duration::from_secs(3661)), "1h1m1s");
    }
}
