//! `envoy.config.accesslog.v3.AccessLog` with the file, stdout and stderr loggers.

use super::core::{data_source, describe_source};
use crate::extension::{select, Kind, Slot};
use crate::model::{AccessLog, AccessLogSink, LogFormat, DEFAULT_FORMAT};
use crate::reader::{Message, Node, Result};

const FILE: Kind = Kind {
    type_name: "envoy.extensions.access_loggers.file.v3.FileAccessLog",
    names: &["envoy.access_loggers.file", "envoy.file_access_log"],
    name_only: false,
};

const STDOUT: Kind = Kind {
    type_name: "envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
    names: &["envoy.access_loggers.stdout"],
    name_only: false,
};

const STDERR: Kind = Kind {
    type_name: "envoy.extensions.access_loggers.stream.v3.StderrAccessLog",
    names: &["envoy.access_loggers.stderr"],
    name_only: false,
};

/// The `access_log` list of `m`.
pub(crate) fn access_logs(m: &mut Message) -> Result<Vec<AccessLog>> {
    m.list("access_log")?.iter().map(access_log).collect()
}

/// Admin's legacy `access_log_path`: a file logger with the default format.
pub(crate) fn legacy_file_log(path: String, yaml_path: &str) -> AccessLog {
    AccessLog {
        name: FILE.names[0].to_owned(),
        sink: AccessLogSink::File(path.into()),
        format: LogFormat::Text(DEFAULT_FORMAT.to_owned()),
        yaml_path: yaml_path.to_owned(),
    }
}

fn access_log(node: &Node) -> Result<AccessLog> {
    let mut m = node.message()?;
    m.unsupported(&["filter"])?;
    let (index, name, config) = match select(&mut m, "access logger", &[FILE, STDOUT, STDERR])? {
        Slot::Known {
            index,
            name,
            config: Some(config),
        } => (index, name, config.body),
        // Every kind here requires its typed_config, so select never returns it absent.
        Slot::Known { .. } => return Err(m.error("missing required field \"typed_config\"")),
        Slot::Unsupported(e) => return Err(e),
    };
    m.finish()?;
    let (sink, (format, yaml_path)) = match index {
        0 => file_log(config, node)?,
        i => {
            let sink = if i == 1 {
                AccessLogSink::Stdout
            } else {
                AccessLogSink::Stderr
            };
            (sink, stream_log(config, node)?)
        }
    };
    Ok(AccessLog {
        name,
        sink,
        format,
        yaml_path,
    })
}

/// A format and the YAML path the formatter should report its errors at.
type Format = (LogFormat, String);

fn default_format(entry: &Node) -> Format {
    (
        LogFormat::Text(DEFAULT_FORMAT.to_owned()),
        entry.path().to_owned(),
    )
}

fn file_log(mut m: Message, entry: &Node) -> Result<(AccessLogSink, Format)> {
    m.unsupported(&["typed_json_format"])?;
    let path = m.required_string("path")?;
    let format = match m.oneof(&["format", "json_format", "log_format"], false)? {
        Some("format") => {
            let n = m.required("format")?;
            match n.string()? {
                f if f.is_empty() => default_format(entry),
                f => (LogFormat::Text(f), n.path().to_owned()),
            }
        }
        Some("json_format") => json_format(&m.required("json_format")?)?,
        Some(_) => substitution_format(&m.required("log_format")?)?,
        None => default_format(entry),
    };
    m.finish()?;
    Ok((AccessLogSink::File(path.into()), format))
}

fn stream_log(mut m: Message, entry: &Node) -> Result<Format> {
    let format = match m.field("log_format")? {
        Some(n) => substitution_format(&n)?,
        None => default_format(entry),
    };
    m.finish()?;
    Ok(format)
}

/// `envoy.config.core.v3.SubstitutionFormatString`.
fn substitution_format(node: &Node) -> Result<Format> {
    let mut m = node.message()?;
    m.unsupported(&[
        "omit_empty_values",
        "content_type",
        "formatters",
        "json_format_options",
    ])?;
    let format = match m.oneof(&["text_format", "json_format", "text_format_source"], true)? {
        Some("text_format") => {
            let n = m.required("text_format")?;
            (LogFormat::Text(n.string()?), n.path().to_owned())
        }
        Some("json_format") => json_format(&m.required("json_format")?)?,
        _ => {
            let n = m.required("text_format_source")?;
            let source = data_source(&n)?;
            let bytes = source
                .read()
                .map_err(|e| n.error(format!("cannot read {}: {e}", describe_source(&source))))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| n.error(format!("{} is not UTF-8 text", describe_source(&source))))?;
            (LogFormat::Text(text), n.path().to_owned())
        }
    };
    m.finish()?;
    Ok(format)
}

/// A `json_format` Struct: keys are output keys, values format strings (or nested objects).
fn json_format(node: &Node) -> Result<Format> {
    let map = node.message()?.raw().clone();
    Ok((LogFormat::Json(map), node.path().to_owned()))
}
