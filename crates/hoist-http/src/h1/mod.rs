//! The HTTP/1.1 server codec, on httparse. (Being built.)
