//! Envoy's substitution formatter: a format string compiled once into literal and operator
//! tokens; text or JSON output.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value as Json};

use super::context::LogContext;
use super::operator::{Operator, Value};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Literal(Vec<u8>),
    Operator(Operator),
}

/// Envoy's command grammar: `%COMMAND(subcommand):length%`, anchored at the `%`.
static COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^%((?:[A-Z]|[0-9]|_)+)(?:\((.*?)\))?(?::([0-9]+))?%")
        .expect("the command grammar is a valid regex")
});

/// Splits a format string into tokens, as Envoy's SubstitutionFormatParser does.
fn parse(format: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut literal = Vec::new();
    let bytes = format.as_bytes();
    let mut pos = 0;
    while pos < bytes.len() {
        if bytes[pos] != b'%' {
            literal.push(bytes[pos]);
            pos += 1;
            continue;
        }
        if bytes.get(pos + 1) == Some(&b'%') {
            literal.push(b'%');
            pos += 2;
            continue;
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(std::mem::take(&mut literal)));
        }
        let invalid = || {
            format!(
                "Incorrect configuration: {format}. Couldn't find valid command at position {pos}"
            )
        };
        let caps = COMMAND.captures(&format[pos..]).ok_or_else(invalid)?;
        let whole = caps.get(0).ok_or_else(invalid)?;
        let command = caps.get(1).map_or("", |m| m.as_str());
        let sub = caps.get(2).map(|m| m.as_str());
        let max_length = match caps.get(3) {
            Some(m) => Some(
                m.as_str()
                    .parse::<usize>()
                    .map_err(|_| format!("Length must be an integer, given: {}", m.as_str()))?,
            ),
            None => None,
        };
        tokens.push(Token::Operator(Operator::parse(command, sub, max_length)?));
        pos += whole.end();
    }
    if !literal.is_empty() {
        tokens.push(Token::Literal(literal));
    }
    Ok(tokens)
}

#[derive(Clone, Debug, PartialEq)]
enum JsonNode {
    Object(Vec<(String, JsonNode)>),
    Array(Vec<JsonNode>),
    /// A value that is exactly one operator: keeps the operator's type (number, string, null).
    Typed(Operator),
    /// Any other string: the tokens concatenated, missing values as `-`.
    Text(Vec<Token>),
    /// Numbers, booleans and null from the config, printed as given.
    Constant(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Text(Vec<Token>),
    Json(JsonNode),
}

/// A compiled access-log format.
#[derive(Clone, Debug, PartialEq)]
pub struct Formatter(Kind);

impl Formatter {
    /// `text_format_source` (or Envoy's default format): printed as written, so a line ends
    /// with the format's own `\n`.
    pub fn text(format: &str) -> Result<Formatter, String> {
        Ok(Formatter(Kind::Text(parse(format)?)))
    }

    /// `json_format`: every string value is a format; one object per line.
    pub fn json(map: &Map<String, Json>) -> Result<Formatter, String> {
        Ok(Formatter(Kind::Json(json_object(map)?)))
    }

    /// Appends the line for `ctx` to `out`.
    pub fn format(&self, ctx: &LogContext<'_>, out: &mut Vec<u8>) {
        match &self.0 {
            Kind::Text(tokens) => write_tokens(tokens, ctx, out),
            Kind::Json(node) => {
                write_json(node, ctx, out);
                out.push(b'\n');
            }
        }
    }
}

fn json_object(map: &Map<String, Json>) -> Result<JsonNode, String> {
    let fields = map
        .iter()
        .map(|(k, v)| Ok((k.clone(), json_node(v)?)))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(JsonNode::Object(fields))
}

fn json_node(value: &Json) -> Result<JsonNode, String> {
    Ok(match value {
        Json::Object(map) => json_object(map)?,
        Json::Array(items) => {
            JsonNode::Array(items.iter().map(json_node).collect::<Result<_, _>>()?)
        }
        Json::String(s) => {
            let mut tokens = parse(s)?;
            match tokens.as_slice() {
                [Token::Operator(_)] => match tokens.pop() {
                    Some(Token::Operator(op)) => JsonNode::Typed(op),
                    _ => JsonNode::Text(tokens),
                },
                _ => JsonNode::Text(tokens),
            }
        }
        constant => JsonNode::Constant(constant.to_string()),
    })
}

fn write_tokens(tokens: &[Token], ctx: &LogContext<'_>, out: &mut Vec<u8>) {
    for token in tokens {
        match token {
            Token::Literal(bytes) => out.extend_from_slice(bytes),
            Token::Operator(op) => match op.evaluate(ctx) {
                Value::Missing => out.push(b'-'),
                Value::Str(s) => out.extend_from_slice(&s),
                Value::Num(n) => out.extend_from_slice(n.to_string().as_bytes()),
            },
        }
    }
}

fn write_json(node: &JsonNode, ctx: &LogContext<'_>, out: &mut Vec<u8>) {
    match node {
        JsonNode::Object(fields) => {
            out.push(b'{');
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_string(key.as_bytes(), out);
                out.push(b':');
                write_json(value, ctx, out);
            }
            out.push(b'}');
        }
        JsonNode::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(item, ctx, out);
            }
            out.push(b']');
        }
        JsonNode::Typed(op) => match op.evaluate(ctx) {
            Value::Missing => out.extend_from_slice(b"null"),
            Value::Str(s) => write_json_string(&s, out),
            Value::Num(n) => out.extend_from_slice(n.to_string().as_bytes()),
        },
        JsonNode::Text(tokens) => {
            let mut text = Vec::new();
            write_tokens(tokens, ctx, &mut text);
            write_json_string(&text, out);
        }
        JsonNode::Constant(c) => out.extend_from_slice(c.as_bytes()),
    }
}

/// A JSON string; bytes that are not UTF-8 (obs-text in a header) become U+FFFD.
fn write_json_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}
