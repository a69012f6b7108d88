//! A reusable byte buffer with a read cursor: bytes are appended at the end and consumed from
//! the front without shifting on every step. The storage is zero-filled once when it grows and
//! then reused, so that encrypting or reading into it never pays for a memset per call.

#[derive(Debug, Default)]
pub(crate) struct ByteBuf {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl ByteBuf {
    pub(crate) fn with_capacity(cap: usize) -> ByteBuf {
        ByteBuf {
            data: vec![0; cap],
            start: 0,
            end: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub(crate) fn filled(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    pub(crate) fn filled_mut(&mut self) -> &mut [u8] {
        &mut self.data[self.start..self.end]
    }

    /// Drops `n` bytes from the front (all of them when `n` is larger).
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// At least `min` writable bytes after the filled part; moves the filled bytes to the front
    /// or grows the storage when needed. Call [`ByteBuf::commit`] with what was written.
    pub(crate) fn spare(&mut self, min: usize) -> &mut [u8] {
        if self.data.len() - self.end < min {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.data.len() - self.end < min {
                self.data.resize(self.end + min, 0);
            }
        }
        &mut self.data[self.end..]
    }

    /// Marks `n` bytes of the last [`ByteBuf::spare`] as filled.
    pub(crate) fn commit(&mut self, n: usize) {
        self.end = (self.end + n).min(self.data.len());
    }

    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        let spare = self.spare(bytes.len());
        spare[..bytes.len()].copy_from_slice(bytes);
        self.commit(bytes.len());
    }

    /// Copies up to `out.len()` bytes from the front into `out` and consumes them.
    pub(crate) fn take_into(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.len());
        out[..n].copy_from_slice(&self.data[self.start..self.start + n]);
        self.consume(n);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::ByteBuf;

    #[test]
    fn append_consume_and_compact() {
        let mut b = ByteBuf::with_capacity(8);
        b.extend_from_slice(b"abcdef");
        b.consume(4);
        assert_eq!(b.filled(), b"ef");
        // Needs 7 spare bytes: compacts first, then grows.
        let s = b.spare(7);
        assert!(s.len() >= 7);
        s[..3].copy_from_slice(b"ghi");
        b.commit(3);
        assert_eq!(b.filled(), b"efghi");
        let mut out = [0u8; 2];
        assert_eq!(b.take_into(&mut out), 2);
        assert_eq!(&out, b"ef");
        b.consume(100);
        assert!(b.is_empty());
        assert_eq!(b.len(), 0);
    }
}
