//! %START_TIME% formatting: Envoy's default `%Y-%m-%dT%H:%M:%E3SZ` and a strftime subset, in UTC.
//!
//! Envoy formats with absl::FormatTime plus its own `%f`/`%[1-9]f` (fractional seconds, 9
//! digits by default) and `%s` (seconds since the epoch). hoist implements the specifiers
//! below and rejects any other at config load rather than printing it raw.

use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    /// %Y
    Year,
    /// %y
    Year2,
    /// %m
    Month,
    /// %d
    Day,
    /// %e: day of month, space padded.
    DaySpace,
    /// %j
    DayOfYear,
    /// %H
    Hour,
    /// %I
    Hour12,
    /// %M
    Minute,
    /// %S
    Second,
    /// %E<n>S / %E*S: seconds with n fractional digits (* = as many as needed, trimmed).
    SecondFrac(Option<u8>),
    /// %f, %<n>f: fractional seconds, n digits (9 by default).
    Fraction(u8),
    /// %s
    EpochSeconds,
    /// %p
    AmPm,
    /// %a / %A
    Weekday {
        long: bool,
    },
    /// %b / %h / %B
    MonthName {
        long: bool,
    },
    /// %u (1-7, Monday = 1) / %w (0-6, Sunday = 0)
    WeekdayNumber {
        monday_one: bool,
    },
    /// %z: +0000 (always UTC); %Ez: +00:00
    Offset {
        colon: bool,
    },
    /// %Z
    ZoneName,
}

/// A compiled START_TIME format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TimeFormat(Vec<Piece>);

impl TimeFormat {
    /// Envoy's default: `2024-05-01T12:00:00.123Z`.
    pub(super) fn envoy_default() -> TimeFormat {
        TimeFormat(vec![
            Piece::Year,
            Piece::Literal("-".into()),
            Piece::Month,
            Piece::Literal("-".into()),
            Piece::Day,
            Piece::Literal("T".into()),
            Piece::Hour,
            Piece::Literal(":".into()),
            Piece::Minute,
            Piece::Literal(":".into()),
            Piece::SecondFrac(Some(3)),
            Piece::Literal("Z".into()),
        ])
    }

    pub(super) fn parse(fmt: &str) -> Result<TimeFormat, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = fmt.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                literal.push(c);
                continue;
            }
            let unsupported =
                |spec: &str| format!("START_TIME: unsupported format specifier %{spec}");
            let spec = chars.next().ok_or_else(|| unsupported(""))?;
            let piece = match spec {
                '%' => {
                    literal.push('%');
                    continue;
                }
                'n' => {
                    literal.push('\n');
                    continue;
                }
                't' => {
                    literal.push('\t');
                    continue;
                }
                'Y' => Piece::Year,
                'y' => Piece::Year2,
                'm' => Piece::Month,
                'd' => Piece::Day,
                'e' => Piece::DaySpace,
                'j' => Piece::DayOfYear,
                'H' => Piece::Hour,
                'I' => Piece::Hour12,
                'M' => Piece::Minute,
                'S' => Piece::Second,
                'f' => Piece::Fraction(9),
                '1'..='9' => match chars.next() {
                    Some('f') => Piece::Fraction(spec as u8 - b'0'),
                    other => return Err(unsupported(&format!("{spec}{}", opt(other)))),
                },
                's' => Piece::EpochSeconds,
                'p' => Piece::AmPm,
                'a' => Piece::Weekday { long: false },
                'A' => Piece::Weekday { long: true },
                'b' | 'h' => Piece::MonthName { long: false },
                'B' => Piece::MonthName { long: true },
                'u' => Piece::WeekdayNumber { monday_one: true },
                'w' => Piece::WeekdayNumber { monday_one: false },
                'z' => Piece::Offset { colon: false },
                'Z' => Piece::ZoneName,
                'T' | 'D' | 'F' | 'R' => {
                    let expansion = match spec {
                        'T' => "%H:%M:%S",
                        'D' => "%m/%d/%y",
                        'F' => "%Y-%m-%d",
                        _ => "%H:%M",
                    };
                    flush(&mut literal, &mut pieces);
                    pieces.extend(TimeFormat::parse(expansion)?.0);
                    continue;
                }
                'E' => match (chars.next(), chars.peek().copied()) {
                    (Some('z'), _) => Piece::Offset { colon: true },
                    (Some('*'), Some('S')) => {
                        chars.next();
                        Piece::SecondFrac(None)
                    }
                    (Some(d @ '0'..='9'), Some('S')) => {
                        chars.next();
                        Piece::SecondFrac(Some(d as u8 - b'0'))
                    }
                    (other, _) => return Err(unsupported(&format!("E{}", opt(other)))),
                },
                other => return Err(unsupported(&other.to_string())),
            };
            flush(&mut literal, &mut pieces);
            pieces.push(piece);
        }
        flush(&mut literal, &mut pieces);
        Ok(TimeFormat(pieces))
    }

    pub(super) fn format(&self, t: SystemTime, out: &mut Vec<u8>) {
        let (secs, nanos) = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
            // Before 1970: floor to the previous second so the fraction stays positive.
            Err(e) => {
                let d = e.duration();
                let (s, n) = (d.as_secs() as i64, d.subsec_nanos());
                if n == 0 {
                    (-s, 0)
                } else {
                    (-s - 1, 1_000_000_000 - n)
                }
            }
        };
        let days = secs.div_euclid(86_400);
        let secs_of_day = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let (hour, minute, second) = (secs_of_day / 3600, secs_of_day / 60 % 60, secs_of_day % 60);
        let weekday = (days + 4).rem_euclid(7); // 1970-01-01 was a Thursday; Sunday = 0.
        let mut s = String::new();
        use std::fmt::Write;
        for piece in &self.0 {
            let _ = match piece {
                Piece::Literal(l) => write!(s, "{l}"),
                Piece::Year => write!(s, "{year:04}"),
                Piece::Year2 => write!(s, "{:02}", year.rem_euclid(100)),
                Piece::Month => write!(s, "{month:02}"),
                Piece::Day => write!(s, "{day:02}"),
                Piece::DaySpace => write!(s, "{day:2}"),
                Piece::DayOfYear => write!(s, "{:03}", days - days_from_civil(year, 1, 1) + 1),
                Piece::Hour => write!(s, "{hour:02}"),
                Piece::Hour12 => write!(s, "{:02}", (hour + 11) % 12 + 1),
                Piece::Minute => write!(s, "{minute:02}"),
                Piece::Second => write!(s, "{second:02}"),
                Piece::SecondFrac(digits) => {
                    let _ = write!(s, "{second:02}");
                    match digits {
                        Some(0) => Ok(()),
                        Some(n) => write!(s, ".{}", fraction(nanos, *n)),
                        None if nanos == 0 => Ok(()),
                        None => write!(s, ".{}", fraction(nanos, 9).trim_end_matches('0')),
                    }
                }
                Piece::Fraction(n) => write!(s, "{}", fraction(nanos, *n)),
                Piece::EpochSeconds => write!(s, "{secs}"),
                Piece::AmPm => write!(s, "{}", if hour < 12 { "AM" } else { "PM" }),
                Piece::Weekday { long } => {
                    let name = WEEKDAYS[weekday as usize];
                    write!(s, "{}", if *long { name } else { &name[..3] })
                }
                Piece::MonthName { long } => {
                    let name = MONTHS[(month - 1) as usize];
                    write!(s, "{}", if *long { name } else { &name[..3] })
                }
                Piece::WeekdayNumber { monday_one } => match (*monday_one, weekday) {
                    (true, 0) => write!(s, "7"),
                    _ => write!(s, "{weekday}"),
                },
                Piece::Offset { colon: false } => write!(s, "+0000"),
                Piece::Offset { colon: true } => write!(s, "+00:00"),
                Piece::ZoneName => write!(s, "UTC"),
            };
        }
        out.extend_from_slice(s.as_bytes());
    }
}

const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

fn opt(c: Option<char>) -> String {
    c.map(String::from).unwrap_or_default()
}

fn flush(literal: &mut String, pieces: &mut Vec<Piece>) {
    if !literal.is_empty() {
        pieces.push(Piece::Literal(std::mem::take(literal)));
    }
}

/// The first `digits` (1-9) digits of the nanoseconds, truncated as absl does.
fn fraction(nanos: u32, digits: u8) -> String {
    let digits = digits.clamp(1, 9) as usize;
    let nine = format!("{nanos:09}");
    nine[..digits].to_owned()
}

/// Howard Hinnant's civil_from_days: days since 1970-01-01 to (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// 2024-05-01T12:00:00.123456789Z, a Wednesday, day 122 of a leap year.
    fn t() -> SystemTime {
        UNIX_EPOCH + Duration::new(1_714_564_800, 123_456_789)
    }

    fn fmt(f: &str) -> String {
        let mut out = Vec::new();
        TimeFormat::parse(f).unwrap().format(t(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn default_format() {
        let mut out = Vec::new();
        TimeFormat::envoy_default().format(t(), &mut out);
        assert_eq!(out, b"2024-05-01T12:00:00.123Z");
        assert_eq!(
            TimeFormat::parse("%Y-%m-%dT%H:%M:%E3SZ").unwrap(),
            TimeFormat::envoy_default()
        );
    }

    #[test]
    fn specifiers() {
        assert_eq!(fmt("%Y/%m/%d %H:%M:%S %z"), "2024/05/01 12:00:00 +0000");
        assert_eq!(fmt("%s.%3f"), "1714564800.123");
        assert_eq!(fmt("%s.%6f"), "1714564800.123456");
        assert_eq!(fmt("%s.%9f|%f"), "1714564800.123456789|123456789");
        assert_eq!(
            fmt("[%e|%j|%y|%I %p|%a %A|%b %h %B|%u %w|%Z|%Ez]"),
            "[ 1|122|24|12 PM|Wed Wednesday|May May May|3 3|UTC|+00:00]"
        );
        assert_eq!(fmt("%T %D %F %R"), "12:00:00 05/01/24 2024-05-01 12:00");
        assert_eq!(fmt("%E*S %E0S %E6S %%"), "00.123456789 00 00.123456 %");
    }

    #[test]
    fn unknown_specifiers_are_errors() {
        assert_eq!(
            TimeFormat::parse("%Q").unwrap_err(),
            "START_TIME: unsupported format specifier %Q"
        );
        assert!(TimeFormat::parse("%").is_err());
        assert!(TimeFormat::parse("%3x").is_err());
        assert!(TimeFormat::parse("%Ex").is_err());
    }

    #[test]
    fn calendar_edges() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        let mut out = Vec::new();
        TimeFormat::envoy_default().format(UNIX_EPOCH - Duration::from_millis(1), &mut out);
        assert_eq!(out, b"1969-12-31T23:59:59.999Z");
    }
}
