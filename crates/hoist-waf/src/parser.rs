//! SecLang lexing: physical lines → directives. Handles `\` line continuations, `#` comments,
//! double-quoted arguments (only `\"` is unescaped, as Apache and Coraza do, so regex escapes
//! like `\\` reach the regex compiler untouched) and `Include` with globs in the last path
//! component.

use crate::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One directive with its arguments, unquoted, and where it came from.
#[derive(Debug, Clone)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    pub file: Arc<Path>,
    pub line: usize,
}

impl Directive {
    pub fn error(&self, message: impl Into<String>) -> Error {
        Error::new(self.file.to_path_buf(), self.line, message)
    }
}

/// Includes nest at most this deep: a file including itself must fail, not recurse forever.
const MAX_INCLUDE_DEPTH: usize = 16;

/// Reads `path` and every file it includes, in order.
pub fn parse_file(path: &Path) -> Result<Vec<Directive>, Error> {
    let mut out = Vec::new();
    parse_file_into(path, 0, &mut out, None)?;
    Ok(out)
}

fn parse_file_into(
    path: &Path,
    depth: usize,
    out: &mut Vec<Directive>,
    from: Option<&Directive>,
) -> Result<(), Error> {
    if depth > MAX_INCLUDE_DEPTH {
        let (file, line) = from.map_or((path.to_path_buf(), 0), |d| (d.file.to_path_buf(), d.line));
        return Err(Error::new(file, line, "Include nested too deep"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        let (file, line) = from.map_or((path.to_path_buf(), 0), |d| (d.file.to_path_buf(), d.line));
        Error::new(file, line, format!("cannot read {}: {e}", path.display()))
    })?;
    parse_text_into(&text, path, depth, out)
}

/// Parses configuration text; `origin` names it in errors and anchors relative `Include`s.
pub fn parse_str(text: &str, origin: &Path) -> Result<Vec<Directive>, Error> {
    let mut out = Vec::new();
    parse_text_into(text, origin, 0, &mut out)?;
    Ok(out)
}

fn parse_text_into(
    text: &str,
    origin: &Path,
    depth: usize,
    out: &mut Vec<Directive>,
) -> Result<(), Error> {
    let file: Arc<Path> = Arc::from(origin);
    let mut pending = String::new();
    let mut start_line = 0;
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if pending.is_empty() {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            start_line = line_no;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        pending.push_str(line);
        let logical = std::mem::take(&mut pending);
        let directive = tokenize(&logical, &file, start_line)?;
        if let Some(d) = directive {
            if d.name.eq_ignore_ascii_case("Include") {
                include(&d, depth, out)?;
            } else {
                out.push(d);
            }
        }
    }
    if !pending.is_empty() {
        let d = tokenize(&pending, &file, start_line)?;
        out.extend(d);
    }
    Ok(())
}

fn include(d: &Directive, depth: usize, out: &mut Vec<Directive>) -> Result<(), Error> {
    let [pattern] = d.args.as_slice() else {
        return Err(d.error("Include takes exactly one path"));
    };
    let base = d.file.parent().unwrap_or_else(|| Path::new("."));
    let pattern = base.join(pattern);
    let paths = expand_glob(&pattern).map_err(|m| d.error(m))?;
    if paths.is_empty() && !pattern.to_string_lossy().contains(['*', '?']) {
        return Err(d.error(format!("Include: {} does not exist", pattern.display())));
    }
    for path in paths {
        parse_file_into(&path, depth + 1, out, Some(d))?;
    }
    Ok(())
}

/// Expands `*` and `?` in the last path component, sorted as shells do so rule order is stable.
fn expand_glob(pattern: &Path) -> Result<Vec<PathBuf>, String> {
    let name = pattern
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.contains(['*', '?']) {
        return Ok(if pattern.exists() {
            vec![pattern.to_path_buf()]
        } else {
            Vec::new()
        });
    }
    let dir = pattern.parent().unwrap_or_else(|| Path::new("."));
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("Include: cannot list {}: {e}", dir.display()))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| glob_match(name.as_bytes(), e.file_name().to_string_lossy().as_bytes()))
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    Ok(found)
}

pub(crate) fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| glob_match(rest, &name[i..])),
        Some((b'?', rest)) => !name.is_empty() && glob_match(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && glob_match(rest, &name[1..]),
    }
}

fn tokenize(logical: &str, file: &Arc<Path>, line: usize) -> Result<Option<Directive>, Error> {
    let mut tokens = Vec::new();
    let bytes = logical.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if bytes[i] == b'"' || bytes[i] == b'\'' {
            let quote = bytes[i];
            let mut token = Vec::new();
            i += 1;
            let mut closed = false;
            while i < bytes.len() {
                let c = bytes[i];
                if c == b'\\' && bytes.get(i + 1) == Some(&quote) {
                    token.push(quote);
                    i += 2;
                } else if c == quote {
                    closed = true;
                    i += 1;
                    break;
                } else {
                    token.push(c);
                    i += 1;
                }
            }
            if !closed {
                return Err(Error::new(
                    file.to_path_buf(),
                    line,
                    "unterminated quoted argument",
                ));
            }
            tokens.push(String::from_utf8_lossy(&token).into_owned());
        } else {
            let start = i;
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            tokens.push(logical[start..i].to_string());
        }
    }
    let mut iter = tokens.into_iter();
    let Some(name) = iter.next() else {
        return Ok(None);
    };
    Ok(Some(Directive {
        name,
        args: iter.collect(),
        file: file.clone(),
        line,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_and_quotes() {
        let text = "# c\nSecRule ARGS \"@rx a\\\"b\" \\\n    \"id:1,\\\n    pass\"\n";
        let d = parse_str(text, Path::new("t.conf")).expect("parses");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].line, 2);
        assert_eq!(d[0].args, vec!["ARGS", "@rx a\"b", "id:1,    pass"]);
    }

    #[test]
    fn unterminated_quote_names_line() {
        let e = parse_str("\n\nSecRule ARGS \"@rx", Path::new("x.conf")).expect_err("fails");
        assert_eq!(e.to_string(), "x.conf:3: unterminated quoted argument");
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"*.conf", b"REQUEST-901.conf"));
        assert!(!glob_match(b"*.conf", b"a.data"));
        assert!(glob_match(b"a?c", b"abc"));
    }
}
