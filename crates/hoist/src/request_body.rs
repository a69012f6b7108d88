//! A request body that filters asked for (`Decision::NeedBody`): read whole up to the
//! filters' limit, or, when they allow it (`BodyLimit::partial`, ModSecurity's
//! SecRequestBodyLimitAction ProcessPartial), read past the limit only as far as the piece
//! that crosses it, the rest left on the connection for the upstream: a large upload is then
//! neither refused nor held in memory whole.

use bytes::{Bytes, BytesMut};
use hoist_filters::BodyLimit;

use crate::stream::RequestBody;

/// What `read` got.
pub enum Read {
    /// The whole body, within the limit.
    Whole(Bytes),
    /// More than the limit: the pieces read until it was passed (the limit and a little
    /// more); the rest is still to be read.
    Partial(Bytes),
    /// More than the limit, which the filters do not allow: the client gets a 413.
    TooLarge,
}

/// Reads `body` up to `limit.bytes`.
pub async fn read<B: RequestBody>(body: &mut B, limit: BodyLimit) -> Result<Read, B::Error> {
    let mut read = BytesMut::new();
    while let Some(chunk) = body.next_chunk().await? {
        let over = (read.len() + chunk.len()) as u64 > limit.bytes;
        if over && !limit.partial {
            return Ok(Read::TooLarge);
        }
        read.extend_from_slice(&chunk);
        if over {
            return Ok(Read::Partial(read.freeze()));
        }
    }
    Ok(Read::Whole(read.freeze()))
}

/// A body whose first bytes were already read (`Read::Partial`): those, then the rest.
pub struct Prefixed<'b, B> {
    first: Option<Bytes>,
    rest: &'b mut B,
}

impl<'b, B> Prefixed<'b, B> {
    pub fn new(first: Option<Bytes>, rest: &'b mut B) -> Prefixed<'b, B> {
        Prefixed { first, rest }
    }
}

impl<B: RequestBody> RequestBody for Prefixed<'_, B> {
    type Error = B::Error;

    async fn next_chunk(&mut self) -> Result<Option<Bytes>, B::Error> {
        match self.first.take() {
            Some(first) if !first.is_empty() => Ok(Some(first)),
            _ => self.rest.next_chunk().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of fixed pieces.
    struct Pieces(std::collections::VecDeque<&'static [u8]>);

    impl RequestBody for Pieces {
        type Error = ();
        async fn next_chunk(&mut self) -> Result<Option<Bytes>, ()> {
            Ok(self.0.pop_front().map(Bytes::from_static))
        }
    }

    fn pieces(p: &[&'static [u8]]) -> Pieces {
        Pieces(p.iter().copied().collect())
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(f))
            .unwrap_or_else(|e| panic!("runtime: {e}"))
    }

    fn limit(bytes: u64, partial: bool) -> BodyLimit {
        BodyLimit { bytes, partial }
    }

    /// Everything `body` still yields, concatenated.
    async fn rest<B: RequestBody>(body: &mut B) -> Vec<u8> {
        let mut all = Vec::new();
        while let Ok(Some(piece)) = body.next_chunk().await {
            all.extend_from_slice(&piece);
        }
        all
    }

    #[test]
    fn within_the_limit_the_body_is_read_whole() {
        run(async {
            for partial in [false, true] {
                let mut b = pieces(&[b"abc", b"def"]);
                match read(&mut b, limit(6, partial)).await {
                    Ok(Read::Whole(w)) => assert_eq!(&w[..], b"abcdef"),
                    _ => panic!("not whole (partial {partial})"),
                }
            }
            let mut b = pieces(&[b"abc", b"def"]);
            assert!(matches!(
                read(&mut b, limit(5, false)).await,
                Ok(Read::TooLarge)
            ));
        });
    }

    /// Past the limit a partial read stops after the piece that crossed it, and `Prefixed`
    /// hands on that start and then the rest: nothing lost, nothing doubled.
    #[test]
    fn past_the_limit_a_partial_read_keeps_the_rest_for_later() {
        run(async {
            let mut b = pieces(&[b"abc", b"def", b"ghi", b"jk"]);
            let first = match read(&mut b, limit(4, true)).await {
                Ok(Read::Partial(p)) => p,
                _ => panic!("not partial"),
            };
            assert_eq!(&first[..], b"abcdef");
            let mut whole = Prefixed::new(Some(first), &mut b);
            assert_eq!(rest(&mut whole).await, b"abcdefghijk");
            let mut none = pieces(&[b"xy"]);
            assert_eq!(rest(&mut Prefixed::new(None, &mut none)).await, b"xy");
        });
    }
}
