//! Verification outcomes with Envoy's texts (jwt_verify_lib's `getStatusString`): the text is
//! the body of the 401/403, and `jwt_authn_access_denied{<text with spaces as _>}` the
//! %RESPONSE_CODE_DETAILS%. Both are static so a rejection allocates neither.

/// One verification outcome. Only the statuses hoist can produce are listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    JwtMissed,
    JwtNotYetValid,
    JwtExpired,
    JwtBadFormat,
    JwtHeaderParseErrorBadBase64,
    JwtHeaderParseErrorBadJson,
    JwtHeaderBadAlg,
    JwtHeaderNotImplementedAlg,
    JwtHeaderBadKid,
    JwtPayloadParseErrorBadBase64,
    JwtEd25519SignatureWrongLength,
    JwtPayloadParseErrorBadJson,
    JwtPayloadParseErrorIssNotString,
    JwtPayloadParseErrorSubNotString,
    JwtPayloadParseErrorIatNotInteger,
    JwtPayloadParseErrorIatOutOfRange,
    JwtPayloadParseErrorNbfNotInteger,
    JwtPayloadParseErrorNbfOutOfRange,
    JwtPayloadParseErrorExpNotInteger,
    JwtPayloadParseErrorExpOutOfRange,
    JwtPayloadParseErrorJtiNotString,
    JwtPayloadParseErrorAudNotString,
    JwtSignatureParseErrorBadBase64,
    JwtUnknownIssuer,
    JwtAudienceNotAllowed,
    JwtVerificationFail,
    JwksParseError,
    JwksNoKeys,
    JwksBadKeys,
    JwksNoValidKeys,
    JwksKidAlgMismatch,
    JwksRsaParseError,
    JwksEcXorYBadBase64,
    JwksEcParseError,
    JwksOctBadBase64,
    JwksOkpXBadBase64,
    JwksOkpXWrongLength,
    JwksFetchFail,
    JwksMissingKty,
    JwksBadKty,
    JwksNotImplementedKty,
    JwksRsaKeyBadAlg,
    JwksRsaKeyMissingN,
    JwksRsaKeyBadN,
    JwksRsaKeyMissingE,
    JwksRsaKeyBadE,
    JwksEcKeyBadAlg,
    JwksEcKeyBadCrv,
    JwksEcKeyAlgOrCrvUnsupported,
    JwksEcKeyAlgNotCompatibleWithCrv,
    JwksEcKeyMissingX,
    JwksEcKeyBadX,
    JwksEcKeyMissingY,
    JwksEcKeyBadY,
    JwksHmacKeyBadAlg,
    JwksHmacKeyMissingK,
    JwksHmacKeyBadK,
    JwksOkpKeyBadAlg,
    JwksOkpKeyMissingCrv,
    JwksOkpKeyBadCrv,
    JwksOkpKeyCrvUnsupported,
    JwksOkpKeyMissingX,
    JwksOkpKeyBadX,
}

macro_rules! texts {
    ($($status:ident => $text:literal, $details:literal;)*) => {
        impl Status {
            /// Envoy's text for this status (the body of a rejection).
            pub fn text(self) -> &'static str {
                match self {
                    $(Status::$status => $text,)*
                }
            }

            /// `jwt_authn_access_denied{<text>}` with whitespace as `_`, as Envoy logs it.
            pub fn details(self) -> &'static str {
                match self {
                    $(Status::$status => $details,)*
                }
            }

            #[cfg(test)]
            const ALL: &'static [Status] = &[$(Status::$status,)*];
        }
    };
}

texts! {
    Ok => "OK", "jwt_authn_access_denied{OK}";
    JwtMissed => "Jwt is missing", "jwt_authn_access_denied{Jwt_is_missing}";
    JwtNotYetValid => "Jwt not yet valid", "jwt_authn_access_denied{Jwt_not_yet_valid}";
    JwtExpired => "Jwt is expired", "jwt_authn_access_denied{Jwt_is_expired}";
    JwtBadFormat => "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections",
        "jwt_authn_access_denied{Jwt_is_not_in_the_form_of_Header.Payload.Signature_with_two_dots_and_3_sections}";
    JwtHeaderParseErrorBadBase64 => "Jwt header is an invalid Base64url encoded",
        "jwt_authn_access_denied{Jwt_header_is_an_invalid_Base64url_encoded}";
    JwtHeaderParseErrorBadJson => "Jwt header is an invalid JSON",
        "jwt_authn_access_denied{Jwt_header_is_an_invalid_JSON}";
    JwtHeaderBadAlg => "Jwt header [alg] field is required and must be a string",
        "jwt_authn_access_denied{Jwt_header_[alg]_field_is_required_and_must_be_a_string}";
    JwtHeaderNotImplementedAlg => "Jwt header [alg] is not supported",
        "jwt_authn_access_denied{Jwt_header_[alg]_is_not_supported}";
    JwtHeaderBadKid => "Jwt header [kid] field is not a string",
        "jwt_authn_access_denied{Jwt_header_[kid]_field_is_not_a_string}";
    JwtPayloadParseErrorBadBase64 => "Jwt payload is an invalid Base64url encoded",
        "jwt_authn_access_denied{Jwt_payload_is_an_invalid_Base64url_encoded}";
    JwtEd25519SignatureWrongLength => "Jwt ED25519 signature is wrong length",
        "jwt_authn_access_denied{Jwt_ED25519_signature_is_wrong_length}";
    JwtPayloadParseErrorBadJson => "Jwt payload is an invalid JSON",
        "jwt_authn_access_denied{Jwt_payload_is_an_invalid_JSON}";
    JwtPayloadParseErrorIssNotString => "Jwt payload [iss] field is not a string",
        "jwt_authn_access_denied{Jwt_payload_[iss]_field_is_not_a_string}";
    JwtPayloadParseErrorSubNotString => "Jwt payload [sub] field is not a string",
        "jwt_authn_access_denied{Jwt_payload_[sub]_field_is_not_a_string}";
    JwtPayloadParseErrorIatNotInteger => "Jwt payload [iat] field is not an integer",
        "jwt_authn_access_denied{Jwt_payload_[iat]_field_is_not_an_integer}";
    JwtPayloadParseErrorIatOutOfRange => "Jwt payload [iat] field is not a positive 64 bit integer",
        "jwt_authn_access_denied{Jwt_payload_[iat]_field_is_not_a_positive_64_bit_integer}";
    JwtPayloadParseErrorNbfNotInteger => "Jwt payload [nbf] field is not an integer",
        "jwt_authn_access_denied{Jwt_payload_[nbf]_field_is_not_an_integer}";
    JwtPayloadParseErrorNbfOutOfRange => "Jwt payload [nbf] field is not a positive 64 bit integer",
        "jwt_authn_access_denied{Jwt_payload_[nbf]_field_is_not_a_positive_64_bit_integer}";
    JwtPayloadParseErrorExpNotInteger => "Jwt payload [exp] field is not an integer",
        "jwt_authn_access_denied{Jwt_payload_[exp]_field_is_not_an_integer}";
    JwtPayloadParseErrorExpOutOfRange => "Jwt payload [exp] field is not a positive 64 bit integer",
        "jwt_authn_access_denied{Jwt_payload_[exp]_field_is_not_a_positive_64_bit_integer}";
    JwtPayloadParseErrorJtiNotString => "Jwt payload [jti] field is not a string",
        "jwt_authn_access_denied{Jwt_payload_[jti]_field_is_not_a_string}";
    JwtPayloadParseErrorAudNotString => "Jwt payload [aud] field is not a string or string list",
        "jwt_authn_access_denied{Jwt_payload_[aud]_field_is_not_a_string_or_string_list}";
    JwtSignatureParseErrorBadBase64 => "Jwt signature is an invalid Base64url encoded",
        "jwt_authn_access_denied{Jwt_signature_is_an_invalid_Base64url_encoded}";
    JwtUnknownIssuer => "Jwt issuer is not configured",
        "jwt_authn_access_denied{Jwt_issuer_is_not_configured}";
    JwtAudienceNotAllowed => "Audiences in Jwt are not allowed",
        "jwt_authn_access_denied{Audiences_in_Jwt_are_not_allowed}";
    JwtVerificationFail => "Jwt verification fails",
        "jwt_authn_access_denied{Jwt_verification_fails}";
    JwksParseError => "Jwks is an invalid JSON", "jwt_authn_access_denied{Jwks_is_an_invalid_JSON}";
    JwksNoKeys => "Jwks does not have [keys] field",
        "jwt_authn_access_denied{Jwks_does_not_have_[keys]_field}";
    JwksBadKeys => "[keys] in Jwks is not an array",
        "jwt_authn_access_denied{[keys]_in_Jwks_is_not_an_array}";
    JwksNoValidKeys => "Jwks doesn't have any valid public key",
        "jwt_authn_access_denied{Jwks_doesn't_have_any_valid_public_key}";
    JwksKidAlgMismatch => "Jwks doesn't have key to match kid or alg from Jwt",
        "jwt_authn_access_denied{Jwks_doesn't_have_key_to_match_kid_or_alg_from_Jwt}";
    JwksRsaParseError => "Jwks RSA [n] or [e] field is missing or has a parse error",
        "jwt_authn_access_denied{Jwks_RSA_[n]_or_[e]_field_is_missing_or_has_a_parse_error}";
    JwksEcXorYBadBase64 => "Jwks EC [x] or [y] field is an invalid Base64.",
        "jwt_authn_access_denied{Jwks_EC_[x]_or_[y]_field_is_an_invalid_Base64.}";
    JwksEcParseError => "Jwks EC [x] and [y] fields have a parse error.",
        "jwt_authn_access_denied{Jwks_EC_[x]_and_[y]_fields_have_a_parse_error.}";
    JwksOctBadBase64 => "Jwks Oct key is an invalid Base64",
        "jwt_authn_access_denied{Jwks_Oct_key_is_an_invalid_Base64}";
    JwksOkpXBadBase64 => "Jwks OKP [x] field is an invalid Base64.",
        "jwt_authn_access_denied{Jwks_OKP_[x]_field_is_an_invalid_Base64.}";
    JwksOkpXWrongLength => "Jwks OKP [x] field is wrong length.",
        "jwt_authn_access_denied{Jwks_OKP_[x]_field_is_wrong_length.}";
    JwksFetchFail => "Jwks remote fetch is failed",
        "jwt_authn_access_denied{Jwks_remote_fetch_is_failed}";
    JwksMissingKty => "[kty] is missing in [keys]", "jwt_authn_access_denied{[kty]_is_missing_in_[keys]}";
    JwksBadKty => "[kty] is bad in [keys]", "jwt_authn_access_denied{[kty]_is_bad_in_[keys]}";
    JwksNotImplementedKty => "[kty] is not supported in [keys]",
        "jwt_authn_access_denied{[kty]_is_not_supported_in_[keys]}";
    JwksRsaKeyBadAlg => "[alg] is not started with [RS] or [PS] for an RSA key",
        "jwt_authn_access_denied{[alg]_is_not_started_with_[RS]_or_[PS]_for_an_RSA_key}";
    JwksRsaKeyMissingN => "[n] field is missing for a RSA key",
        "jwt_authn_access_denied{[n]_field_is_missing_for_a_RSA_key}";
    JwksRsaKeyBadN => "[n] field is not string for a RSA key",
        "jwt_authn_access_denied{[n]_field_is_not_string_for_a_RSA_key}";
    JwksRsaKeyMissingE => "[e] field is missing for a RSA key",
        "jwt_authn_access_denied{[e]_field_is_missing_for_a_RSA_key}";
    JwksRsaKeyBadE => "[e] field is not string for a RSA key",
        "jwt_authn_access_denied{[e]_field_is_not_string_for_a_RSA_key}";
    JwksEcKeyBadAlg => "[alg] is not started with [ES] for an EC key",
        "jwt_authn_access_denied{[alg]_is_not_started_with_[ES]_for_an_EC_key}";
    JwksEcKeyBadCrv => "[crv] field is not string for an EC key",
        "jwt_authn_access_denied{[crv]_field_is_not_string_for_an_EC_key}";
    JwksEcKeyAlgOrCrvUnsupported => "[crv] or [alg] field is not supported for an EC key",
        "jwt_authn_access_denied{[crv]_or_[alg]_field_is_not_supported_for_an_EC_key}";
    JwksEcKeyAlgNotCompatibleWithCrv => "[crv] field specified is not compatible with [alg] for an EC key",
        "jwt_authn_access_denied{[crv]_field_specified_is_not_compatible_with_[alg]_for_an_EC_key}";
    JwksEcKeyMissingX => "[x] field is missing for an EC key",
        "jwt_authn_access_denied{[x]_field_is_missing_for_an_EC_key}";
    JwksEcKeyBadX => "[x] field is not string for an EC key",
        "jwt_authn_access_denied{[x]_field_is_not_string_for_an_EC_key}";
    JwksEcKeyMissingY => "[y] field is missing for an EC key",
        "jwt_authn_access_denied{[y]_field_is_missing_for_an_EC_key}";
    JwksEcKeyBadY => "[y] field is not string for an EC key",
        "jwt_authn_access_denied{[y]_field_is_not_string_for_an_EC_key}";
    JwksHmacKeyBadAlg => "[alg] does not start with [HS] for an HMAC key",
        "jwt_authn_access_denied{[alg]_does_not_start_with_[HS]_for_an_HMAC_key}";
    JwksHmacKeyMissingK => "[k] field is missing for an HMAC key",
        "jwt_authn_access_denied{[k]_field_is_missing_for_an_HMAC_key}";
    JwksHmacKeyBadK => "[k] field is not string for an HMAC key",
        "jwt_authn_access_denied{[k]_field_is_not_string_for_an_HMAC_key}";
    JwksOkpKeyBadAlg => "[alg] is not [EdDSA] for an OKP key",
        "jwt_authn_access_denied{[alg]_is_not_[EdDSA]_for_an_OKP_key}";
    JwksOkpKeyMissingCrv => "[crv] field is missing for an OKP key",
        "jwt_authn_access_denied{[crv]_field_is_missing_for_an_OKP_key}";
    JwksOkpKeyBadCrv => "[crv] field is not string for an OKP key",
        "jwt_authn_access_denied{[crv]_field_is_not_string_for_an_OKP_key}";
    JwksOkpKeyCrvUnsupported => "[crv] field is not supported for an OKP key",
        "jwt_authn_access_denied{[crv]_field_is_not_supported_for_an_OKP_key}";
    JwksOkpKeyMissingX => "[x] field is missing for an OKP key",
        "jwt_authn_access_denied{[x]_field_is_missing_for_an_OKP_key}";
    JwksOkpKeyBadX => "[x] field is not string for an OKP key",
        "jwt_authn_access_denied{[x]_field_is_not_string_for_an_OKP_key}";
}

impl Status {
    /// Envoy answers 403 for a wrong audience and 401 for everything else.
    pub fn http_status(self) -> u16 {
        if self == Status::JwtAudienceNotAllowed {
            403
        } else {
            401
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_the_text_with_whitespace_as_underscores() {
        for s in Status::ALL {
            let expected = format!("jwt_authn_access_denied{{{}}}", s.text().replace(' ', "_"));
            assert_eq!(s.details(), expected, "{s:?}");
        }
    }

    #[test]
    fn only_a_wrong_audience_is_forbidden() {
        assert_eq!(Status::JwtAudienceNotAllowed.http_status(), 403);
        assert_eq!(Status::JwtExpired.http_status(), 401);
        assert_eq!(Status::JwtMissed.http_status(), 401);
    }
}
