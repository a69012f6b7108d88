//! Envoy's response flags (%RESPONSE_FLAGS%): why a request ended the way it did. Shared by
//! the connection manager, the HTTP filters (a rate limit sets RL) and the access log.

/// Envoy's response flags, as a bitset whose bit order is Envoy's `CORE_RESPONSE_FLAGS` order:
/// `%RESPONSE_FLAGS%` joins the short codes of the set flags in that order ("UT,DI,FI").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseFlags(u32);

macro_rules! response_flags {
    ($($bit:literal $name:ident $code:literal;)*) => {
        impl ResponseFlags {
            $(pub const $name: ResponseFlags = ResponseFlags(1 << $bit);)*
        }
        /// Short codes, indexed by bit.
        const SHORT_CODES: &[&str] = &[$($code),*];
    };
}

response_flags! {
    0 FAILED_LOCAL_HEALTH_CHECK "LH";
    1 NO_HEALTHY_UPSTREAM "UH";
    2 UPSTREAM_REQUEST_TIMEOUT "UT";
    3 LOCAL_RESET "LR";
    4 UPSTREAM_REMOTE_RESET "UR";
    5 UPSTREAM_CONNECTION_FAILURE "UF";
    6 UPSTREAM_CONNECTION_TERMINATION "UC";
    7 UPSTREAM_OVERFLOW "UO";
    8 NO_ROUTE_FOUND "NR";
    9 DELAY_INJECTED "DI";
    10 FAULT_INJECTED "FI";
    11 RATE_LIMITED "RL";
    12 UNAUTHORIZED_EXTERNAL_SERVICE "UAEX";
    13 RATE_LIMIT_SERVICE_ERROR "RLSE";
    14 DOWNSTREAM_CONNECTION_TERMINATION "DC";
    15 UPSTREAM_RETRY_LIMIT_EXCEEDED "URX";
    16 STREAM_IDLE_TIMEOUT "SI";
    17 INVALID_ENVOY_REQUEST_HEADERS "IH";
    18 DOWNSTREAM_PROTOCOL_ERROR "DPE";
    19 UPSTREAM_MAX_STREAM_DURATION_REACHED "UMSDR";
    20 RESPONSE_FROM_CACHE_FILTER "RFCF";
    21 NO_FILTER_CONFIG_FOUND "NFCF";
    22 DURATION_TIMEOUT "DT";
    23 UPSTREAM_PROTOCOL_ERROR "UPE";
    24 NO_CLUSTER_FOUND "NC";
    25 OVERLOAD_MANAGER "OM";
    26 DNS_RESOLUTION_FAILED "DF";
    27 DROP_OVERLOAD "DO";
    28 DOWNSTREAM_REMOTE_RESET "DR";
}

impl ResponseFlags {
    pub const NONE: ResponseFlags = ResponseFlags(0);

    pub fn insert(&mut self, flag: ResponseFlags) {
        self.0 |= flag.0;
    }

    pub fn contains(self, flag: ResponseFlags) -> bool {
        self.0 & flag.0 == flag.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Envoy's `ResponseFlagUtils::toShortString`: the codes joined with ",", or "-".
    pub fn short_string(self) -> String {
        if self.is_empty() {
            return "-".to_owned();
        }
        let codes: Vec<&str> = SHORT_CODES
            .iter()
            .enumerate()
            .filter(|(bit, _)| self.0 & (1 << bit) != 0)
            .map(|(_, code)| *code)
            .collect();
        codes.join(",")
    }
}

impl std::ops::BitOr for ResponseFlags {
    type Output = ResponseFlags;

    fn bitor(self, rhs: ResponseFlags) -> ResponseFlags {
        ResponseFlags(self.0 | rhs.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_join_in_envoys_order() {
        assert_eq!(ResponseFlags::NONE.short_string(), "-");
        let flags = ResponseFlags::FAULT_INJECTED
            | ResponseFlags::UPSTREAM_REQUEST_TIMEOUT
            | ResponseFlags::DELAY_INJECTED;
        assert_eq!(flags.short_string(), "UT,DI,FI");
        let mut flags = ResponseFlags::NONE;
        flags.insert(ResponseFlags::RATE_LIMITED);
        assert!(flags.contains(ResponseFlags::RATE_LIMITED));
        assert!(!flags.contains(ResponseFlags::NO_ROUTE_FOUND));
        assert_eq!(flags.short_string(), "RL");
        assert_eq!(
            (ResponseFlags::DNS_RESOLUTION_FAILED | ResponseFlags::NO_HEALTHY_UPSTREAM)
                .short_string(),
            "UH,DF"
        );
    }

    #[test]
    fn every_flag_has_its_own_code() {
        assert_eq!(SHORT_CODES.len(), 29);
        let all = ResponseFlags((1 << SHORT_CODES.len()) - 1);
        assert_eq!(
            all.short_string(),
            "LH,UH,UT,LR,UR,UF,UC,UO,NR,DI,FI,RL,UAEX,RLSE,DC,URX,SI,IH,DPE,UMSDR,RFCF,NFCF,DT,UPE,\
             NC,OM,DF,DO,DR"
        );
    }
}
