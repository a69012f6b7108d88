//! Proto-JSON scalars: integers (numbers, quoted numbers, wrapper messages) and durations.

use std::time::Duration;

use serde_json::Value;

use super::describe;

/// The largest duration protobuf allows (10000 years).
const MAX_DURATION_SECONDS: u64 = 315_576_000_000;

/// An integer as proto-JSON accepts it: a number without a fraction, a quoted number, or the
/// `{value: N}` form of the `google.protobuf.*Value` wrappers.
pub(super) fn integer(value: &Value) -> Result<i128, String> {
    let invalid = || format!("expected an integer, got {}", describe(value));
    match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(i128::from(i))
            } else if let Some(u) = n.as_u64() {
                Ok(i128::from(u))
            } else {
                // YAML gives floats for some integer spellings (`1e3`, values beyond 64 bits):
                // whole ones are integers; the caller's range check rejects what is too big.
                match n.as_f64() {
                    Some(f) if f.is_finite() && f.fract() == 0.0 => Ok(f as i128),
                    _ => Err(invalid()),
                }
            }
        }
        Value::String(s) => s.trim().parse::<i128>().map_err(|_| invalid()),
        Value::Object(map) if map.len() == 1 => match map.get("value") {
            Some(inner) => integer(inner),
            None => Err(invalid()),
        },
        _ => Err(invalid()),
    }
}

/// A duration in proto-JSON form: seconds with up to nine fractional digits and an `s` suffix.
pub(super) fn duration(value: &Value) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "expected a duration such as \"5s\" or \"0.250s\", got {}",
            describe(value)
        )
    };
    let Value::String(text) = value else {
        return Err(invalid());
    };
    let Some(body) = text.strip_suffix('s') else {
        return Err(invalid());
    };
    if body.starts_with('-') {
        return Err(format!("duration {} must not be negative", describe(value)));
    }
    let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 9 {
        return Err(invalid());
    }
    if body.contains('.') && fraction.is_empty() {
        return Err(invalid());
    }
    let seconds: u64 = whole.parse().map_err(|_| invalid())?;
    let nanos: u32 = if fraction.is_empty() {
        0
    } else {
        let padded = format!("{fraction:0<9}");
        padded.parse().map_err(|_| invalid())?
    };
    if seconds > MAX_DURATION_SECONDS {
        return Err(format!(
            "duration {} is longer than {MAX_DURATION_SECONDS}s",
            describe(value)
        ));
    }
    Ok(Duration::new(seconds, nanos))
}

/// A duration from the `{seconds, nanos}` form.
pub(super) fn duration_from_parts(seconds: i64, nanos: u32) -> Result<Duration, String> {
    let seconds = u64::try_from(seconds)
        .map_err(|_| format!("duration of {seconds} seconds must not be negative"))?;
    if seconds > MAX_DURATION_SECONDS {
        return Err(format!(
            "duration of {seconds} seconds is longer than {MAX_DURATION_SECONDS}s"
        ));
    }
    Ok(Duration::new(seconds, nanos))
}
