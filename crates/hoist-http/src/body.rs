//! Response bodies. A file-backed body is a region of a mapped file: it is never copied into a
//! heap buffer, so the transport can send it with sendfile or encrypt it in place. A streamed
//! body (a proxied response) arrives in pieces from a bounded channel: its producer waits while
//! the channel is full, so a slow client slows the upstream read instead of growing a buffer.

use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hoist_tls::file::FileRegion;
use hoist_tls::splice::SpliceSource;
use tokio::sync::{mpsc, oneshot};

#[derive(Clone, Debug, Default)]
pub enum Body {
    #[default]
    Empty,
    Bytes(Bytes),
    File(FileRegion),
    Stream(StreamBody),
}

impl Body {
    /// The length a response announces; a stream of unknown length counts as 0 (the codecs
    /// check [`StreamBody::length`] before framing one).
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File(f) => f.len,
            Body::Stream(s) => s.length.unwrap_or(0),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Body::Stream(s) => s.length == Some(0),
            _ => self.len() == 0,
        }
    }
}

/// How many pieces may wait between the producer and the writer. With pieces of at most
/// 64 KiB this bounds what a stream holds in memory.
pub const STREAM_CHANNEL_PIECES: usize = 4;

/// The receiving end of a streamed body. Cloning shares the one receiver: the first writer to
/// [`take`](StreamBody::take) it gets the pieces. An `Err` piece means the producer failed
/// (the upstream reset or timed out): the writer must end the response abnormally.
#[derive(Clone, Debug)]
pub struct StreamBody {
    /// Content-Length when the producer knows it; None: until the producer ends.
    pub length: Option<u64>,
    receiver: Arc<Mutex<Option<mpsc::Receiver<io::Result<Bytes>>>>>,
    /// The producer's offer to have the body spliced instead (see [`SpliceOffer`]).
    splice: Arc<Mutex<Option<SpliceOffer>>>,
}

/// A producer's offer to let the writer move the body socket to socket with splice(2): the
/// body bytes already read (`buffered`, to be written first), then `remaining` bytes still in
/// `source`. The writer that takes it must answer with a [`SpliceReport`]; taking the channel
/// instead ([`StreamBody::take`]) declines it, and the producer then sends every piece through
/// the channel as usual.
pub struct SpliceOffer {
    pub buffered: Bytes,
    pub source: SpliceSource,
    pub remaining: u64,
    /// The route timeout, which covers the whole response.
    pub deadline: Option<std::time::Instant>,
    reply: oneshot::Sender<SpliceReport>,
}

impl std::fmt::Debug for SpliceOffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpliceOffer")
            .field("buffered", &self.buffered.len())
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

/// What became of a [`SpliceOffer`]; the counts are bytes moved from `source` (beyond
/// `buffered`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpliceReport {
    /// Not taken: the producer sends the body through the channel, `buffered` first.
    Declined,
    /// The whole body was forwarded.
    Done(u64),
    /// A kernel-TLS control record stopped the splice after this many bytes; the producer
    /// sends the rest through the channel.
    Interrupted(u64),
    /// The forward failed (either side): the upstream connection is not reusable.
    Failed(u64),
}

impl SpliceOffer {
    /// Answers the producer.
    pub fn report(self, report: SpliceReport) {
        let _ = self.reply.send(report);
    }
}

/// The producing end: `send` waits while the channel is full.
pub type StreamSender = mpsc::Sender<io::Result<Bytes>>;

impl StreamBody {
    pub fn channel(length: Option<u64>) -> (StreamSender, StreamBody) {
        Self::channel_with(length, STREAM_CHANNEL_PIECES)
    }

    /// A channel holding at most `pieces` pieces (at least one) before the producer waits.
    pub fn channel_with(length: Option<u64>, pieces: usize) -> (StreamSender, StreamBody) {
        let (tx, rx) = mpsc::channel(pieces.max(1));
        let body = StreamBody {
            length,
            receiver: Arc::new(Mutex::new(Some(rx))),
            splice: Arc::new(Mutex::new(None)),
        };
        (tx, body)
    }

    /// Makes a [`SpliceOffer`]; the receiver gets the writer's answer (an error: the body was
    /// dropped unanswered, as when the client went away).
    pub fn offer_splice(
        &self,
        buffered: Bytes,
        source: SpliceSource,
        remaining: u64,
        deadline: Option<std::time::Instant>,
    ) -> oneshot::Receiver<SpliceReport> {
        let (reply, answer) = oneshot::channel();
        let offer = SpliceOffer {
            buffered,
            source,
            remaining,
            deadline,
            reply,
        };
        *lock(&self.splice) = Some(offer);
        answer
    }

    /// The splice offer, once, for a writer that can splice.
    pub fn take_splice(&self) -> Option<SpliceOffer> {
        lock(&self.splice).take()
    }

    /// The receiver, once; None when another clone took it (nothing to send then). Declines a
    /// splice offer not taken before.
    pub fn take(&self) -> Option<mpsc::Receiver<io::Result<Bytes>>> {
        if let Some(offer) = self.take_splice() {
            offer.report(SpliceReport::Declined);
        }
        lock(&self.receiver).take()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stream_is_taken_once_and_bounded() {
        let (tx, body) = StreamBody::channel(Some(3));
        let clone = Body::Stream(body.clone());
        assert_eq!(clone.len(), 3);
        let mut rx = body.take().unwrap();
        assert!(body.take().is_none());
        for _ in 0..STREAM_CHANNEL_PIECES {
            tx.try_send(Ok(Bytes::from_static(b"x"))).unwrap();
        }
        // Full: the producer must wait for the writer.
        assert!(tx.try_send(Ok(Bytes::from_static(b"x"))).is_err());
        assert_eq!(rx.recv().await.unwrap().unwrap(), Bytes::from_static(b"x"));
        let (_, unknown) = StreamBody::channel(None);
        assert!(!Body::Stream(unknown).is_empty());
    }

    #[test]
    fn a_channel_holds_the_pieces_it_was_given_and_at_least_one() {
        for (asked, held) in [(0, 1), (1, 1), (16, 16)] {
            let (tx, body) = StreamBody::channel_with(None, asked);
            let _rx = body.take().unwrap();
            for _ in 0..held {
                tx.try_send(Ok(Bytes::from_static(b"x"))).unwrap();
            }
            assert!(
                tx.try_send(Ok(Bytes::from_static(b"x"))).is_err(),
                "{asked}"
            );
        }
    }
}
