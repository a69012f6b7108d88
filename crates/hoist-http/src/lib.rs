//! HTTP for hoist: request and response heads shared by both codecs, bodies (in memory or a
//! file region), and the HTTP/1.1 server codec. HTTP/2 uses the h2 crate directly from the
//! connection manager; both codecs produce the same [`RequestHead`] and take the same
//! [`ResponseHead`] and [`Body`].
#![forbid(unsafe_code)]

pub mod body;
mod flags;
pub mod h1;
mod head;

pub use body::Body;
pub use flags::ResponseFlags;
pub use head::{RequestHead, ResponseHead, Version};
