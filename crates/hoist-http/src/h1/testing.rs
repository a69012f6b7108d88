//! An in-memory transport for the codec's tests: reads come in the pieces the test chose,
//! writes are recorded.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use hoist_tls::file::{FileRegion, MappedFile};
use hoist_tls::transport::{TlsInfo, Transport};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) enum Step {
    Data(Vec<u8>),
    /// One poll answers Pending, as a socket with nothing to read does.
    Pending,
}

#[derive(Default)]
pub(crate) struct Mock {
    reads: VecDeque<Step>,
    pub written: Vec<u8>,
    pub file_writes: usize,
    pub vectored_writes: usize,
    pub shut_down: bool,
}

impl Mock {
    /// Each piece is returned by its own read (possibly over several if the reader's buffer is
    /// smaller); after the last one, EOF.
    pub(crate) fn new<P: AsRef<[u8]>>(pieces: &[P]) -> Self {
        Mock {
            reads: pieces
                .iter()
                .map(|p| Step::Data(p.as_ref().to_vec()))
                .collect(),
            ..Mock::default()
        }
    }

    pub(crate) fn steps(steps: Vec<Step>) -> Self {
        Mock {
            reads: steps.into(),
            ..Mock::default()
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.reads.push_back(Step::Data(data.to_vec()));
    }

    pub(crate) fn written_str(&self) -> String {
        String::from_utf8_lossy(&self.written).into_owned()
    }
}

impl AsyncRead for Mock {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.reads.pop_front() {
            None => Poll::Ready(Ok(())),
            Some(Step::Pending) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Some(Step::Data(mut d)) => {
                let n = d.len().min(buf.remaining());
                buf.put_slice(&d[..n]);
                if n < d.len() {
                    self.reads.push_front(Step::Data(d.split_off(n)));
                }
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl AsyncWrite for Mock {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.vectored_writes += 1;
        // Takes at most 1000 bytes per call so partial vectored writes get exercised.
        let mut budget = 1000;
        let mut n = 0;
        for b in bufs {
            let take = b.len().min(budget);
            self.written.extend_from_slice(&b[..take]);
            budget -= take;
            n += take;
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shut_down = true;
        Poll::Ready(Ok(()))
    }
}

impl Transport for Mock {
    async fn write_file<'a>(&'a mut self, head: &'a [u8], body: &'a FileRegion) -> io::Result<()> {
        self.file_writes += 1;
        self.written.extend_from_slice(head);
        self.written.extend_from_slice(body.bytes());
        Ok(())
    }

    fn tls_info(&self) -> Option<&TlsInfo> {
        None
    }
}

/// A file region over a fresh temporary file holding `content`.
pub(crate) fn file_region(content: &[u8]) -> FileRegion {
    static N: AtomicU64 = AtomicU64::new(0);
    let path: PathBuf = std::env::temp_dir().join(format!(
        "hoist-http-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, content).unwrap();
    let file: Arc<MappedFile> = MappedFile::open(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    FileRegion::whole(file)
}

/// Runs a future to completion on a fresh single-threaded runtime.
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}
