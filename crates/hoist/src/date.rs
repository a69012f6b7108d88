//! The `date` response header, formatted once per second per thread rather than per response.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use http::HeaderValue;

thread_local! {
    static CACHE: RefCell<(u64, HeaderValue)> = const { RefCell::new((u64::MAX, HeaderValue::from_static(""))) };
}

pub fn date_header() -> HeaderValue {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            let text = httpdate::fmt_http_date(now);
            // An HTTP date is plain ASCII; the fallback only keeps this infallible.
            c.1 = HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""));
            c.0 = secs;
        }
        c.1.clone()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_an_http_date() {
        let v = super::date_header();
        let s = v.to_str().unwrap();
        assert!(s.ends_with(" GMT"), "{s}");
        assert!(httpdate::parse_http_date(s).is_ok());
    }
}
