//! `envoy.type.v3.HttpStatus`: `{code: TooManyRequests}` or `{code: 429}`.

use hoist_config::reader::{describe, Node, Result};
use serde_json::Value;

/// `envoy.type.v3.StatusCode` (Empty = 0 is refused, as Envoy's validation does).
const CODES: &[(&str, u16)] = &[
    ("Continue", 100),
    ("OK", 200),
    ("Created", 201),
    ("Accepted", 202),
    ("NonAuthoritativeInformation", 203),
    ("NoContent", 204),
    ("ResetContent", 205),
    ("PartialContent", 206),
    ("MultiStatus", 207),
    ("AlreadyReported", 208),
    ("IMUsed", 226),
    ("MultipleChoices", 300),
    ("MovedPermanently", 301),
    ("Found", 302),
    ("SeeOther", 303),
    ("NotModified", 304),
    ("UseProxy", 305),
    ("TemporaryRedirect", 307),
    ("PermanentRedirect", 308),
    ("BadRequest", 400),
    ("Unauthorized", 401),
    ("PaymentRequired", 402),
    ("Forbidden", 403),
    ("NotFound", 404),
    ("MethodNotAllowed", 405),
    ("NotAcceptable", 406),
    ("ProxyAuthenticationRequired", 407),
    ("RequestTimeout", 408),
    ("Conflict", 409),
    ("Gone", 410),
    ("LengthRequired", 411),
    ("PreconditionFailed", 412),
    ("PayloadTooLarge", 413),
    ("URITooLong", 414),
    ("UnsupportedMediaType", 415),
    ("RangeNotSatisfiable", 416),
    ("ExpectationFailed", 417),
    ("MisdirectedRequest", 421),
    ("UnprocessableEntity", 422),
    ("Locked", 423),
    ("FailedDependency", 424),
    ("UpgradeRequired", 426),
    ("PreconditionRequired", 428),
    ("TooManyRequests", 429),
    ("RequestHeaderFieldsTooLarge", 431),
    ("InternalServerError", 500),
    ("NotImplemented", 501),
    ("BadGateway", 502),
    ("ServiceUnavailable", 503),
    ("GatewayTimeout", 504),
    ("HTTPVersionNotSupported", 505),
    ("VariantAlsoNegotiates", 506),
    ("InsufficientStorage", 507),
    ("LoopDetected", 508),
    ("NotExtended", 510),
    ("NetworkAuthenticationRequired", 511),
];

/// The status a rate limited request gets. Like Envoy, a code below 400 becomes 429.
pub fn status_code(node: &Node) -> Result<u16> {
    let mut m = node.message()?;
    let code_node = m.required("code")?;
    let code = match code_node.value() {
        Value::String(s) => CODES.iter().find(|(n, _)| n == s).map(|(_, c)| *c),
        Value::Number(_) => {
            let n = code_node.u32()?;
            CODES
                .iter()
                .find(|(_, c)| u32::from(*c) == n)
                .map(|(_, c)| *c)
        }
        _ => None,
    };
    let Some(code) = code else {
        return Err(code_node.error(format!(
            "unknown status code {}; expected one of envoy.type.v3.StatusCode (e.g. TooManyRequests or 429)",
            describe(code_node.value())
        )));
    };
    m.finish()?;
    Ok(if code < 400 { 429 } else { code })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(v: Value) -> Result<u16> {
        status_code(&Node::new(&v, "status"))
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(code(json!({"code": "ServiceUnavailable"})).unwrap(), 503);
        assert_eq!(code(json!({"code": 503})).unwrap(), 503);
        assert_eq!(
            code(json!({"code": "OK"})).unwrap(),
            429,
            "below 400 becomes 429"
        );
        let e = code(json!({"code": 0})).unwrap_err();
        assert_eq!(e.path, "status.code");
        let e = code(json!({"code": 499})).unwrap_err();
        assert_eq!(e.path, "status.code");
        let e = code(json!({})).unwrap_err();
        assert_eq!(e.path, "status");
    }
}
