//! Where lines go: a file opened for append at config load, stdout or stderr, written from a
//! per-worker buffer so that a worker never takes a lock or makes a syscall per line.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::LogContext;
use super::formatter::Formatter;

/// A worker writes its buffer once it holds this much (Envoy's file buffer is 64 KiB too).
pub const FLUSH_BYTES: usize = 64 * 1024;
/// Envoy's default `file_flush_interval`: buffered lines reach the file within a second.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub enum AccessLogSink {
    /// envoy.access_loggers.file. The file is shared by all workers; each write is one
    /// O_APPEND write(2) of whole lines, so lines of different workers never interleave.
    File { path: PathBuf, file: Arc<File> },
    /// envoy.access_loggers.stdout
    Stdout,
    /// envoy.access_loggers.stderr
    Stderr,
}

impl AccessLogSink {
    /// Opens (creating if needed) `path` for append, as Envoy does when the config loads.
    pub fn open_file(path: &Path) -> io::Result<AccessLogSink> {
        let file = OpenOptions::new().append(true).create(true).open(path)?;
        Ok(AccessLogSink::File {
            path: path.to_owned(),
            file: Arc::new(file),
        })
    }

    fn write(&self, buf: &[u8]) -> io::Result<()> {
        match self {
            // `&File` implements Write: no lock, and for a buffer of whole lines on an O_APPEND
            // file the kernel takes it in one write(2).
            AccessLogSink::File { file, .. } => (&**file).write_all(buf),
            AccessLogSink::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(buf)?;
                out.flush()
            }
            AccessLogSink::Stderr => io::stderr().lock().write_all(buf),
        }
    }
}

/// One configured access log: a compiled format and a sink. Built at config load, shared by
/// the workers; each worker logs through its own [`WorkerAccessLog`].
#[derive(Clone, Debug)]
pub struct AccessLogger {
    formatter: Arc<Formatter>,
    sink: AccessLogSink,
}

impl AccessLogger {
    pub fn new(formatter: Formatter, sink: AccessLogSink) -> AccessLogger {
        AccessLogger {
            formatter: Arc::new(formatter),
            sink,
        }
    }

    pub fn formatter(&self) -> &Formatter {
        &self.formatter
    }

    pub fn sink(&self) -> &AccessLogSink {
        &self.sink
    }

    /// A buffer for one worker.
    pub fn worker(&self) -> WorkerAccessLog {
        WorkerAccessLog {
            logger: self.clone(),
            buffer: Vec::with_capacity(FLUSH_BYTES + 4096),
            last_flush: Instant::now(),
        }
    }
}

/// A worker's side of an [`AccessLogger`]: lines accumulate in memory and reach the sink in
/// one write when the buffer passes [`FLUSH_BYTES`], when a line is logged [`FLUSH_INTERVAL`]
/// after the last write, when the worker's once-a-second timer calls
/// [`flush_if_due`](WorkerAccessLog::flush_if_due), and on [`flush`](WorkerAccessLog::flush) or
/// drop at shutdown. Owned by one worker (share it between that worker's tasks with
/// `Rc<RefCell<_>>`), so logging takes no lock.
pub struct WorkerAccessLog {
    logger: AccessLogger,
    buffer: Vec<u8>,
    last_flush: Instant,
}

impl WorkerAccessLog {
    /// Formats one line. An error is a failed write of the buffered lines (which are dropped,
    /// as Envoy drops them); the caller counts it.
    pub fn log(&mut self, ctx: &LogContext<'_>) -> io::Result<()> {
        self.logger.formatter.format(ctx, &mut self.buffer);
        if self.buffer.len() >= FLUSH_BYTES {
            return self.flush();
        }
        self.flush_if_due(Instant::now())
    }

    /// Writes the buffer if the flush interval has passed since the last write.
    pub fn flush_if_due(&mut self, now: Instant) -> io::Result<()> {
        if now.saturating_duration_since(self.last_flush) >= FLUSH_INTERVAL {
            return self.flush();
        }
        Ok(())
    }

    /// Writes whatever is buffered.
    pub fn flush(&mut self) -> io::Result<()> {
        self.last_flush = Instant::now();
        if self.buffer.is_empty() {
            return Ok(());
        }
        let result = self.logger.sink.write(&self.buffer);
        self.buffer.clear();
        result
    }

    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }
}

impl Drop for WorkerAccessLog {
    fn drop(&mut self) {
        // Shutdown path: nobody is left to report an error to.
        let _ = self.flush();
    }
}
