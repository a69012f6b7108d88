//! Number formatting as Envoy's admin prints doubles.

/// C's `%g` with the given precision (Envoy's JSON numbers use `%g`, i.e. precision 6):
/// `precision` significant digits, trailing zeros removed, scientific notation when the
/// exponent is below -4 or at least `precision`. NaN is the caller's business (JSON `null`).
pub(crate) fn format_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return "nan".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if v == 0.0 {
        return "0".to_owned();
    }
    let p = precision.max(1);
    // Rounding to p significant digits decides the exponent (9.9999995 -> 1e+01).
    let sci = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mantissa = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{v:.decimals$}")).to_owned()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// fmt's `{}` for a double (the text histogram summary): shortest round-trip digits, `nan`
/// for NaN.
pub(crate) fn format_shortest(v: f64) -> String {
    if v.is_nan() {
        "nan".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g() {
        assert_eq!(format_g(0.0, 6), "0");
        assert_eq!(format_g(1.0, 6), "1");
        assert_eq!(format_g(99.5, 6), "99.5");
        assert_eq!(format_g(1.025, 6), "1.025");
        assert_eq!(format_g(123456.0, 6), "123456");
        assert_eq!(format_g(1234567.0, 6), "1.23457e+06");
        assert_eq!(format_g(3600000.0, 6), "3.6e+06");
        assert_eq!(format_g(0.0001, 6), "0.0001");
        assert_eq!(format_g(0.00001234, 6), "1.234e-05");
        assert_eq!(format_g(2.0 / 3.0, 6), "0.666667");
        assert_eq!(format_g(9.9999995, 6), "10");
        assert_eq!(format_g(-2.5, 6), "-2.5");
    }

    #[test]
    fn shortest() {
        assert_eq!(format_shortest(f64::NAN), "nan");
        assert_eq!(format_shortest(1.0), "1");
        assert_eq!(format_shortest(1.025), "1.025");
        assert_eq!(format_shortest(6.25), "6.25");
        assert_eq!(format_shortest(3600000.0), "3600000");
    }
}
