//! Response bodies. A file-backed body is a region of a mapped file: it is never copied into a
//! heap buffer, so the transport can send it with sendfile or encrypt it in place.

use bytes::Bytes;
use hoist_tls::file::FileRegion;

#[derive(Clone, Debug, Default)]
pub enum Body {
    #[default]
    Empty,
    Bytes(Bytes),
    File(FileRegion),
}

impl Body {
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File(f) => f.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
