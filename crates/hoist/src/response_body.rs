//! A proxied response body held back for the filters that inspect it (the WAF's phase 4).
//!
//! A forwarded response's body is a stream the writer usually takes piece by piece (or
//! splices socket to socket). A filter that wants the response body needs its bytes before
//! the head is written, so the stream is read here first, up to the filters' limit (the WAF's
//! SecResponseBodyLimit, as ModSecurity buffers it): a body within the limit becomes an
//! ordinary in-memory body (its reply can still be replaced, with a 403 for instance); a
//! longer one is inspected in its first `limit` bytes and then sent whole, those bytes first
//! and the rest as it arrives (ModSecurity's ProcessPartial), so a large download is neither
//! refused nor held in memory.

use bytes::{Bytes, BytesMut};
use hoist_http::body::StreamBody;
use hoist_http::Body;

/// What reading a streamed body up to a limit gave.
pub enum Gathered {
    /// The whole body, within the limit.
    Whole(Bytes),
    /// The body is longer than the limit, or its producer failed before the end: `inspected`
    /// is what arrived within the limit, and `rest` streams the whole body (those bytes
    /// first, then the others, an error included) to the writer.
    Partial { inspected: Bytes, rest: StreamBody },
    /// Another reader had taken the stream: nothing to inspect.
    Taken,
}

impl Gathered {
    /// What the filters inspect and the body the reply then carries; `None` for `Taken`.
    pub fn into_parts(self) -> Option<(Bytes, Body)> {
        match self {
            Gathered::Whole(b) => Some((b.clone(), Body::Bytes(b))),
            Gathered::Partial { inspected, rest } => Some((inspected, Body::Stream(rest))),
            Gathered::Taken => None,
        }
    }
}

/// Reads `body` until it ends or `limit` bytes and one more have arrived: the byte past the
/// limit tells a filter that the body is longer (SecResponseBodyLimitAction Reject answers
/// 500 then).
pub async fn gather(body: &StreamBody, limit: u64) -> Gathered {
    let Some(mut rx) = body.take() else {
        return Gathered::Taken;
    };
    let limit = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    let mut held = BytesMut::new();
    // A piece that did not fit, or the producer's error: what stops the reading early.
    let stopped = loop {
        match rx.recv().await {
            None => return Gathered::Whole(held.freeze()),
            Some(Ok(piece)) if held.len() + piece.len() <= limit => held.extend_from_slice(&piece),
            Some(other) => break other,
        }
    };
    let held = held.freeze();
    let mut inspected = BytesMut::from(&held[..]);
    if let Ok(piece) = &stopped {
        let room = limit.saturating_sub(inspected.len()).min(piece.len());
        inspected.extend_from_slice(&piece[..room]);
    }
    let (tx, rest) = StreamBody::channel(body.length);
    // The writer reads `rest` on this worker while this task refills it.
    tokio::task::spawn_local(async move {
        // No empty piece: a chunked writer would read it as the end.
        let first = [(!held.is_empty()).then_some(Ok(held)), Some(stopped)];
        for piece in first.into_iter().flatten() {
            if tx.send(piece).await.is_err() {
                return;
            }
        }
        while let Some(piece) = rx.recv().await {
            if tx.send(piece).await.is_err() {
                // The client is gone: dropping `rx` tells the producer.
                return;
            }
        }
    });
    Gathered::Partial {
        inspected: inspected.freeze(),
        rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn collect(body: &StreamBody) -> (Vec<u8>, bool) {
        let mut rx = body.take().unwrap();
        let mut all = Vec::new();
        let mut failed = false;
        while let Some(piece) = rx.recv().await {
            match piece {
                Ok(b) => all.extend_from_slice(&b),
                Err(_) => failed = true,
            }
        }
        (all, failed)
    }

    fn run<F: std::future::Future<Output = ()>>(f: F) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f);
    }

    /// A producer sending `pieces` (an `Err` for `None`) then ending.
    fn produce(pieces: Vec<Option<&'static [u8]>>, length: Option<u64>) -> StreamBody {
        let (tx, body) = StreamBody::channel(length);
        tokio::task::spawn_local(async move {
            for p in pieces {
                let piece = match p {
                    Some(b) => Ok(Bytes::from_static(b)),
                    None => Err(std::io::Error::other("upstream reset")),
                };
                if tx.send(piece).await.is_err() {
                    return;
                }
            }
        });
        body
    }

    #[test]
    fn a_body_within_the_limit_is_held_whole() {
        run(async {
            let body = produce(vec![Some(b"abc"), Some(b"def")], Some(6));
            match gather(&body, 5).await {
                Gathered::Whole(b) => assert_eq!(&b[..], b"abcdef"),
                _ => panic!("not whole"),
            }
            let empty = produce(vec![], Some(0));
            assert!(matches!(gather(&empty, 0).await, Gathered::Whole(b) if b.is_empty()));
        });
    }

    #[test]
    fn a_longer_body_is_inspected_in_its_first_bytes_and_sent_whole() {
        run(async {
            let body = produce(vec![Some(b"abc"), Some(b"defg"), Some(b"hij")], None);
            let Gathered::Partial { inspected, rest } = gather(&body, 4).await else {
                panic!("not partial");
            };
            assert_eq!(&inspected[..], b"abcde");
            assert_eq!(rest.length, None);
            assert_eq!(collect(&rest).await, (b"abcdefghij".to_vec(), false));
            // A first piece already past the limit: no empty piece goes ahead of it.
            let body = produce(vec![Some(b"abcdef"), Some(b"g")], Some(7));
            let Gathered::Partial { inspected, rest } = gather(&body, 1).await else {
                panic!("not partial");
            };
            assert_eq!(&inspected[..], b"ab");
            let mut rx = rest.take().unwrap();
            assert_eq!(&rx.recv().await.unwrap().unwrap()[..], b"abcdef");
            assert_eq!(&rx.recv().await.unwrap().unwrap()[..], b"g");
            assert!(rx.recv().await.is_none());
        });
    }

    #[test]
    fn a_producer_error_reaches_the_writer_after_the_bytes_before_it() {
        run(async {
            let body = produce(vec![Some(b"abc"), None], Some(100));
            let Gathered::Partial { inspected, rest } = gather(&body, 1000).await else {
                panic!("not partial");
            };
            assert_eq!(&inspected[..], b"abc");
            assert_eq!(rest.length, Some(100));
            assert_eq!(collect(&rest).await, (b"abc".to_vec(), true));
        });
    }

    #[test]
    fn a_stream_already_taken_is_left_alone() {
        run(async {
            let body = produce(vec![Some(b"abc")], None);
            let _reader = body.take();
            assert!(matches!(gather(&body, 10).await, Gathered::Taken));
        });
    }
}
