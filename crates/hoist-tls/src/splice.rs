//! Forwarding a body with splice(2): upstream socket -> pipe -> downstream socket, so the bytes
//! never enter user space. Both sockets must be plain TCP or kernel TLS (the kernel decrypts
//! into the pipe and encrypts out of it); user-space TLS cannot take part.
//!
//! The pipe bounds what is in flight (its size, 1 MiB when the system allows): when the client
//! is slow the pipe fills, the source is no longer read, and the upstream's TCP window closes,
//! which is the backpressure. Pipes are reused per worker thread, but only empty ones.
//!
//! On a kernel-TLS source a record that is not application data (an alert, close_notify, a
//! NewSessionTicket, a KeyUpdate) makes splice fail with EINVAL: forwarding then stops after
//! everything already in the pipe has been written, and the caller reads the rest with recvmsg
//! ([`Spliced::Interrupted`]), which handles the record.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::task::{ready, Context, Poll};

use rustix::pipe::{fcntl_setpipe_size, pipe_with, splice, PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The pipe size asked for (Linux's default unprivileged maximum).
const PIPE_SIZE: usize = 1 << 20;
/// Empty pipes kept per worker thread.
const MAX_IDLE_PIPES: usize = 8;

/// The readable end a body is spliced from: a duplicate of the upstream socket, registered
/// with the runtime on its own so the downstream writer can wait for it.
pub struct SpliceSource {
    tcp: TcpStream,
    ktls: bool,
}

impl std::fmt::Debug for SpliceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpliceSource")
            .field("tcp", &self.tcp)
            .field("ktls", &self.ktls)
            .finish()
    }
}

impl SpliceSource {
    /// `ktls`: the socket's record layer is in the kernel (control records stop splicing).
    pub fn new(tcp: &TcpStream, ktls: bool) -> io::Result<SpliceSource> {
        // The duplicate shares the socket (and its O_NONBLOCK); closing it closes only the
        // duplicate.
        let fd = tcp.as_fd().try_clone_to_owned()?;
        let tcp = TcpStream::from_std(std::net::TcpStream::from(fd))?;
        Ok(SpliceSource { tcp, ktls })
    }

    /// Moves up to `n` bytes from the socket into `pipe`. `gated`: wait for readability
    /// first (the pipe is empty, so EAGAIN can only mean the socket is).
    fn poll_in(
        &self,
        cx: &mut Context<'_>,
        pipe: BorrowedFd<'_>,
        n: usize,
        gated: bool,
    ) -> Poll<io::Result<usize>> {
        let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
        if !gated {
            // With bytes in the pipe EAGAIN may mean the pipe has no free slot: it must not
            // clear the socket's readiness.
            return Poll::Ready(
                splice(self.tcp.as_fd(), None, pipe, None, n, flags).map_err(io::Error::from),
            );
        }
        loop {
            ready!(self.tcp.poll_read_ready(cx))?;
            match self.tcp.try_io(Interest::READABLE, || {
                splice(self.tcp.as_fd(), None, pipe, None, n, flags).map_err(io::Error::from)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
        }
    }
}

/// A writable socket a pipe can be spliced into (plain TCP, kernel TLS).
pub trait SpliceSink {
    /// Writes up to `n` bytes from `pipe`; `more`: more of the body follows (SPLICE_F_MORE,
    /// so kernel TLS fills its records).
    fn poll_splice_out(
        &mut self,
        cx: &mut Context<'_>,
        pipe: BorrowedFd<'_>,
        n: usize,
        more: bool,
    ) -> Poll<io::Result<usize>>;
}

/// `splice` from `pipe` into `tcp` once it is writable: the sink side of plain TCP and of
/// kernel TLS (after its record budget).
pub(crate) fn poll_splice_into(
    tcp: &TcpStream,
    cx: &mut Context<'_>,
    pipe: BorrowedFd<'_>,
    n: usize,
    more: bool,
) -> Poll<io::Result<usize>> {
    let mut flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
    if more {
        flags |= SpliceFlags::MORE;
    }
    loop {
        ready!(tcp.poll_write_ready(cx))?;
        match tcp.try_io(Interest::WRITABLE, || {
            splice(pipe, None, tcp.as_fd(), None, n, flags).map_err(io::Error::from)
        }) {
            Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => return Poll::Ready(Ok(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

/// How a forward ended when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spliced {
    /// All `len` bytes were written.
    Done,
    /// A kernel-TLS control record stopped the source; every byte counted in `moved` was
    /// written. The caller reads the rest with recvmsg.
    Interrupted,
}

/// A pipe pair and how many bytes it holds.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    size: usize,
    held: usize,
}

thread_local! {
    static PIPES: RefCell<Vec<Pipe>> = const { RefCell::new(Vec::new()) };
}

impl Pipe {
    fn take() -> io::Result<Pipe> {
        if let Some(p) = PIPES.with(|p| p.borrow_mut().pop()) {
            return Ok(p);
        }
        let (read, write) = pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?;
        // Larger than the default 64 KiB when allowed: fewer splice calls per body.
        let size = fcntl_setpipe_size(&write, PIPE_SIZE).unwrap_or(64 * 1024);
        Ok(Pipe {
            read,
            write,
            size,
            held: 0,
        })
    }

    /// Back to the worker's pool if empty; a pipe holding bytes of a failed forward is closed.
    fn give_back(self) {
        if self.held == 0 {
            PIPES.with(|p| {
                let mut pool = p.borrow_mut();
                if pool.len() < MAX_IDLE_PIPES {
                    pool.push(self);
                }
            });
        }
    }
}

/// Moves `len` bytes from `src` into `sink`; `moved` counts what reached the sink (also when
/// an error ends it). An upstream that ends before `len` is an `UnexpectedEof` error.
pub async fn forward<K: SpliceSink>(
    src: &SpliceSource,
    sink: &mut K,
    len: u64,
    moved: &mut u64,
) -> io::Result<Spliced> {
    let mut pipe = Pipe::take()?;
    let mut to_read = len;
    let mut interrupted = false;
    let result = poll_fn(|cx| loop {
        let mut progress = false;
        if to_read > 0 && !interrupted && pipe.held < pipe.size {
            let want = (pipe.size - pipe.held).min(usize::try_from(to_read).unwrap_or(usize::MAX));
            match src.poll_in(cx, pipe.write.as_fd(), want, pipe.held == 0) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "upstream closed before the end of the body",
                    )))
                }
                Poll::Ready(Ok(n)) => {
                    pipe.held += n;
                    to_read -= n as u64;
                    progress = true;
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => {}
                Poll::Ready(Err(e)) if src.ktls && e.raw_os_error() == Some(libc::EINVAL) => {
                    interrupted = true;
                    progress = true;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
        }
        if pipe.held > 0 {
            let more = to_read > 0 && !interrupted;
            match sink.poll_splice_out(cx, pipe.read.as_fd(), pipe.held, more) {
                Poll::Ready(Ok(n)) => {
                    pipe.held -= n.min(pipe.held);
                    *moved += n as u64;
                    progress = true;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
        }
        if pipe.held == 0 && to_read == 0 {
            return Poll::Ready(Ok(Spliced::Done));
        }
        if pipe.held == 0 && interrupted {
            return Poll::Ready(Ok(Spliced::Interrupted));
        }
        if !progress {
            return Poll::Pending;
        }
    })
    .await;
    pipe.give_back();
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::{Read, Write};
    use std::net::TcpListener as StdListener;

    use super::*;
    use crate::plain::PlainTransport;

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    /// A connected pair: (std end, tokio end).
    async fn pair() -> (std::net::TcpStream, TcpStream) {
        let l = StdListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        b.set_nonblocking(true).unwrap();
        (a, TcpStream::from_std(b).unwrap())
    }

    /// Splices `announced` bytes while the upstream writes `sent` and closes; the client
    /// reads everything. Returns (result, moved, what the client got).
    fn run(announced: u64, sent: usize) -> (io::Result<Spliced>, u64, Vec<u8>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (mut upstream, up) = pair().await;
            let (mut client, down) = pair().await;
            let writer = std::thread::spawn(move || {
                upstream.write_all(&pattern(sent)).unwrap();
            });
            let reader = std::thread::spawn(move || {
                let mut got = Vec::new();
                client.read_to_end(&mut got).unwrap();
                got
            });
            let src = SpliceSource::new(&up, false).unwrap();
            let mut sink = PlainTransport::new(down);
            let mut moved = 0;
            let r = forward(&src, &mut sink, announced, &mut moved).await;
            writer.join().unwrap();
            drop(sink);
            let got = tokio::task::spawn_blocking(move || reader.join().unwrap())
                .await
                .unwrap();
            (r, moved, got)
        })
    }

    #[test]
    fn a_body_crosses_byte_exact() {
        let n = 8 * 1024 * 1024 + 3;
        let (r, moved, got) = run(n as u64, n);
        assert_eq!(r.unwrap(), Spliced::Done);
        assert_eq!(moved, n as u64);
        assert!(got == pattern(n), "body differs");
    }

    #[test]
    fn an_upstream_that_ends_early_is_an_error_after_what_it_sent() {
        let n = 3 * 1024 * 1024;
        let (r, moved, got) = run(2 * n as u64, n);
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(moved, n as u64);
        assert!(got == pattern(n), "what was sent arrived");
    }

    #[test]
    fn only_the_announced_length_is_taken() {
        // What follows the body (a pipelined response) stays in the upstream socket.
        let (r, moved, got) = run(1000, 1500);
        assert_eq!(r.unwrap(), Spliced::Done);
        assert_eq!((moved, got.len()), (1000, 1000));
    }
}
