//! The JSON request body processor: a document flattened to ARGS_POST as Coraza names its
//! leaves (`json.a.b`; array items `json.a.0`).
//!
//! Leaves are taken straight from the parser's events rather than from a parsed document:
//! a peer chooses the body, and a 12.5 MiB array of small numbers is millions of values,
//! hundreds of MiB as a tree, before SecArgumentsLimit could be counted. Here parsing stops
//! at the first leaf past the limit. A document nested deeper than `MAX_DEPTH` is an error,
//! not cut off: leaves below the cut would go uninspected.

use crate::body::PairSink;
use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use std::fmt::{self, Write};

/// Below serde_json's own recursion limit (128), so this error is the one a peer sees.
const MAX_DEPTH: usize = 100;

/// Appends the document's leaves to `out`; an error (REQBODY_ERROR's message) when it is not
/// JSON, holds more than `limit` leaves or nests deeper than `MAX_DEPTH`.
pub(crate) fn parse_json(body: &[u8], out: &mut impl PairSink, limit: usize) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let mut name = String::from("json");
    let leaves = Leaves {
        name: &mut name,
        out,
        limit,
        depth: 0,
    };
    leaves
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| format!("JSON: {e}"))
}

/// One value of the document, named `name`.
struct Leaves<'a, S> {
    name: &'a mut String,
    out: &'a mut S,
    limit: usize,
    depth: usize,
}

impl<S: PairSink> Leaves<'_, S> {
    fn leaf<E: Error>(self, value: Vec<u8>) -> Result<(), E> {
        if self.out.len() >= self.limit {
            return Err(E::custom(format!("more than {} arguments", self.limit)));
        }
        self.out.push_raw(|n, v| {
            n.push_str(self.name);
            *v = value;
        });
        Ok(())
    }

    /// The depth of this container's members.
    fn inner_depth<E: Error>(&self) -> Result<usize, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(self.depth + 1)
    }
}

impl<'de, S: PairSink> DeserializeSeed<'de> for Leaves<'_, S> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: PairSink> Visitor<'de> for Leaves<'_, S> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: Error>(self, v: bool) -> Result<(), E> {
        let text: &[u8] = if v { b"true" } else { b"false" };
        self.leaf(text.to_vec())
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<(), E> {
        self.leaf(v.to_string().into_bytes())
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<(), E> {
        self.leaf(v.to_string().into_bytes())
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<(), E> {
        // As serde_json prints it (`1.5`, `100000.0`).
        let text = serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string());
        self.leaf(text.into_bytes())
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        self.leaf(v.as_bytes().to_vec())
    }

    fn visit_string<E: Error>(self, v: String) -> Result<(), E> {
        self.leaf(v.into_bytes())
    }

    /// `null`: an empty value.
    fn visit_unit<E: Error>(self) -> Result<(), E> {
        self.leaf(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.inner_depth()?;
        let base = self.name.len();
        for i in 0usize.. {
            self.name.truncate(base);
            let _ = write!(self.name, ".{i}");
            let item = Leaves {
                name: &mut *self.name,
                out: &mut *self.out,
                limit: self.limit,
                depth,
            };
            if seq.next_element_seed(item)?.is_none() {
                break;
            }
        }
        self.name.truncate(base);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let depth = self.inner_depth()?;
        let base = self.name.len();
        while let Some(key) = map.next_key::<String>()? {
            self.name.truncate(base);
            self.name.push('.');
            self.name.push_str(&key);
            let member = Leaves {
                name: &mut *self.name,
                out: &mut *self.out,
                limit: self.limit,
                depth,
            };
            map.next_value_seed(member)?;
        }
        self.name.truncate(base);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::Pairs;

    fn leaves(body: &str, limit: usize) -> Result<Vec<(String, String)>, String> {
        let mut out = Pairs::new();
        parse_json(body.as_bytes(), &mut out, limit)?;
        Ok(out
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect())
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn leaves_are_named_by_their_path() {
        let got = leaves(
            r#"{"a":{"b":"x","c":[1,-2,1.5,true,null]},"d\"e":"\u00e9","f":[[],{}],"g":[["y"]]}"#,
            100,
        );
        assert_eq!(
            got,
            Ok(pairs(&[
                ("json.a.b", "x"),
                ("json.a.c.0", "1"),
                ("json.a.c.1", "-2"),
                ("json.a.c.2", "1.5"),
                ("json.a.c.3", "true"),
                ("json.a.c.4", ""),
                ("json.d\"e", "é"),
                ("json.g.0.0", "y"),
            ]))
        );
        assert_eq!(leaves("\"top\"", 10), Ok(pairs(&[("json", "top")])));
        assert_eq!(leaves("1e5", 10), Ok(pairs(&[("json", "100000.0")])));
    }

    #[test]
    fn the_limit_stops_parsing_at_the_first_leaf_past_it() {
        assert_eq!(leaves("[1,2,3]", 3).map(|l| l.len()), Ok(3));
        let err = leaves("[1,2,3,4,", 3).unwrap_err();
        assert!(err.starts_with("JSON: more than 3 arguments"), "{err}");
    }

    #[test]
    fn deep_nesting_and_malformed_documents_are_errors() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(leaves(&deep(MAX_DEPTH), 10).map(|l| l.len()), Ok(1));
        let err = leaves(&deep(MAX_DEPTH + 1), 10).unwrap_err();
        assert!(err.contains("nested deeper than 100 levels"), "{err}");
        let err = leaves(&deep(100_000), 10).unwrap_err();
        assert!(err.contains("nested deeper"), "{err}");
        for bad in ["", "{", "[1,]", "{\"a\" 1}", "1 2", "\"\\ud800x\""] {
            assert!(leaves(bad, 10).is_err(), "{bad:?}");
        }
    }
}
