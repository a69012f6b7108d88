//! The kernel TLS system interface: socket options, record-typed recvmsg/sendmsg, and the
//! constants of include/uapi/linux/tls.h. Every `unsafe` block of the offload layer is here.
//!
//! [`Sys`] is the seam between the transport and the kernel: [`Linux`] makes the real calls,
//! and tests put a fault-injecting or plaintext-framing layer in its place, so the transport's
//! handling of ENOENT, EBUSY, EBADMSG, short writes and non-data records runs on kernels
//! without kTLS too.
// The system calls below need raw pointers; each block says why it is sound.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::net::SendFlags;

use super::crypto_info::CryptoInfo;

/// `SOL_TLS` (include/linux/socket.h).
pub const SOL_TLS: libc::c_int = 282;
/// `TCP_ULP`, the upper layer protocol option of SOL_TCP.
pub const TCP_ULP: libc::c_int = 31;
/// Socket options of SOL_TLS.
pub const TLS_TX: libc::c_int = 1;
pub const TLS_RX: libc::c_int = 2;
/// cmsg types of SOL_TLS.
pub const TLS_SET_RECORD_TYPE: libc::c_int = 1;
/// `TLS_RX_EXPECT_NO_PAD` (kernel 6.0+): TLS 1.3 records from this peer carry no padding, so
/// the kernel decrypts straight into the reader's buffer (a padded record is still read,
/// after a retry, and counted in TlsRxNoPadViolation).
pub const TLS_RX_EXPECT_NO_PAD: libc::c_int = 4;
pub const TLS_GET_RECORD_TYPE: libc::c_int = 2;

/// TLS record content types (RFC 8446 section 5.1).
pub const RECORD_CHANGE_CIPHER_SPEC: u8 = 20;
pub const RECORD_ALERT: u8 = 21;
pub const RECORD_HANDSHAKE: u8 = 22;
pub const RECORD_APPLICATION_DATA: u8 = 23;

/// A direction of the record layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Tx,
    Rx,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Tx => "tx",
            Direction::Rx => "rx",
        }
    }

    fn optname(self) -> libc::c_int {
        match self {
            Direction::Tx => TLS_TX,
            Direction::Rx => TLS_RX,
        }
    }
}

/// One record (or the start of one) as recvmsg returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Plaintext bytes placed in the buffer; 0 at end of stream.
    pub len: usize,
    /// The record's content type; application data when the kernel attached no cmsg (which it
    /// only omits for data).
    pub record_type: u8,
    /// MSG_EOR: a non-data record ends with this read. The kernel hands out one non-data
    /// record per call, so a non-data read without it was cut short by the buffer.
    pub end_of_record: bool,
}

/// The system calls the kTLS transport makes.
pub trait Sys {
    /// `setsockopt(SOL_TCP, TCP_ULP, "tls")`.
    fn attach_ulp(&self, fd: BorrowedFd<'_>) -> io::Result<()>;
    /// `setsockopt(SOL_TLS, TLS_TX | TLS_RX, info)`.
    fn set_crypto(&self, fd: BorrowedFd<'_>, dir: Direction, info: &CryptoInfo) -> io::Result<()>;
    /// `recvmsg` with a control buffer for TLS_GET_RECORD_TYPE.
    fn recv_record(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received>;
    /// `sendmsg` of one record of `record_type` (alert, handshake) through TLS_SET_RECORD_TYPE.
    fn send_record(&self, fd: BorrowedFd<'_>, record_type: u8, data: &[u8]) -> io::Result<usize>;
    /// `sendmsg` of application data; `more` sets MSG_MORE (the record stays open).
    fn send(&self, fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>], more: bool) -> io::Result<usize>;
    /// `sendfile(2)` from `file` at `*offset`, advancing it.
    fn sendfile(
        &self,
        fd: BorrowedFd<'_>,
        file: &File,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize>;
    /// Waits (WouldBlock) until everything accepted is on its way. The kernel sends on its
    /// own, so the real call has nothing to do; an emulated kernel in user space does.
    /// Sets TLS_RX_EXPECT_NO_PAD (toward trusted TLS 1.3 peers: upstreams).
    fn expect_no_pad(&self, _fd: BorrowedFd<'_>) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Whether bodies may be spliced into the socket (the real kernel encrypts them; the
    /// test emulator cannot see them).
    fn can_splice(&self) -> bool {
        false
    }

    fn flush(&self, _fd: BorrowedFd<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// The real kernel.
#[derive(Clone, Copy, Debug, Default)]
pub struct Linux;

impl Sys for Linux {
    fn can_splice(&self) -> bool {
        true
    }

    fn expect_no_pad(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        setsockopt_bytes(fd, SOL_TLS, TLS_RX_EXPECT_NO_PAD, &1u32.to_ne_bytes())
    }

    fn attach_ulp(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        setsockopt_bytes(fd, libc::SOL_TCP, TCP_ULP, b"tls")
    }

    fn set_crypto(&self, fd: BorrowedFd<'_>, dir: Direction, info: &CryptoInfo) -> io::Result<()> {
        setsockopt_bytes(fd, SOL_TLS, dir.optname(), info.as_bytes())
    }

    fn recv_record(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
        let mut control = ControlBuf::new();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is a plain C struct for which all-zero is a valid (empty) value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr();
        msg.msg_controllen = control.len() as _;
        // SAFETY: `msg` points at one iovec covering `buf` (exclusively borrowed for the call)
        // and at `control`, both alive until recvmsg returns; the kernel writes within the
        // lengths given. The fd is a valid socket for the duration of the borrow.
        let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let used = (msg.msg_controllen as usize).min(control.len());
        let parsed = parse_record_type(&control.bytes()[..used]);
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            // Cannot happen with CMSG_SPACE(1); the kernel then refuses non-data records (EIO).
            return Err(io::Error::other("TLS record type truncated (MSG_CTRUNC)"));
        }
        Ok(Received {
            len: n as usize,
            record_type: parsed.unwrap_or(RECORD_APPLICATION_DATA),
            end_of_record: msg.msg_flags & libc::MSG_EOR != 0,
        })
    }

    fn send_record(&self, fd: BorrowedFd<'_>, record_type: u8, data: &[u8]) -> io::Result<usize> {
        let mut control = ControlBuf::from_bytes(&record_type_cmsg(record_type));
        let clen = control.len();
        let mut iov = libc::iovec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        // SAFETY: msghdr is a plain C struct for which all-zero is a valid (empty) value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr();
        msg.msg_controllen = clen as _;
        // SAFETY: the iovec covers `data`, which sendmsg only reads (the cast to *mut is what
        // the C prototype asks for); the control buffer holds one well-formed cmsg of `clen`
        // bytes. Both outlive the call.
        let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    fn send(&self, fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>], more: bool) -> io::Result<usize> {
        let mut flags = SendFlags::NOSIGNAL;
        if more {
            flags |= SendFlags::MORE;
        }
        let mut control = rustix::net::SendAncillaryBuffer::default();
        rustix::net::sendmsg(fd, bufs, &mut control, flags).map_err(io::Error::from)
    }

    fn sendfile(
        &self,
        fd: BorrowedFd<'_>,
        file: &File,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        rustix::fs::sendfile(fd, file, Some(offset), count).map_err(io::Error::from)
    }
}

/// `getsockopt(SOL_TCP, TCP_ULP)`: the name of the socket's upper layer protocol ("tls"), or
/// an empty string when none is attached.
pub fn ulp_name(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: `name` and `len` are valid for writes of `len` bytes and one socklen_t; the
    // kernel writes at most `len` bytes and stores the length it wrote.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_TCP,
            TCP_ULP,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = (len as usize).min(name.len());
    let end = name[..len].iter().position(|b| *b == 0).unwrap_or(len);
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

fn setsockopt_bytes(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &[u8],
) -> io::Result<()> {
    // SAFETY: `value` is a readable slice of exactly the length passed; the kernel copies it
    // before returning and does not keep the pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value.as_ptr().cast(),
            value.len() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `CMSG_ALIGN`: Linux aligns control messages to the size of a long.
const fn cmsg_align(len: usize) -> usize {
    let a = std::mem::size_of::<libc::c_long>();
    (len + a - 1) & !(a - 1)
}

const CMSG_HDR: usize = cmsg_align(std::mem::size_of::<libc::cmsghdr>());

/// `CMSG_SPACE(1)`: room for one cmsg with a one-byte payload (the record type).
pub const CMSG_SPACE_1: usize = CMSG_HDR + cmsg_align(1);

const CONTROL_WORDS: usize = CMSG_SPACE_1.div_ceil(8);

/// A control buffer aligned for `cmsghdr`, of CMSG_SPACE(1) bytes.
struct ControlBuf {
    words: [u64; CONTROL_WORDS],
}

impl ControlBuf {
    fn new() -> ControlBuf {
        ControlBuf {
            words: [0; CONTROL_WORDS],
        }
    }

    fn from_bytes(bytes: &[u8; CMSG_SPACE_1]) -> ControlBuf {
        let mut c = ControlBuf::new();
        for (w, chunk) in c.words.iter_mut().zip(bytes.chunks(8)) {
            let mut ne = [0u8; 8];
            ne[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_ne_bytes(ne);
        }
        c
    }

    fn len(&self) -> usize {
        CMSG_SPACE_1
    }

    fn as_mut_ptr(&mut self) -> *mut libc::c_void {
        self.words.as_mut_ptr().cast()
    }

    fn bytes(&self) -> [u8; CMSG_SPACE_1] {
        let mut out = [0u8; CMSG_SPACE_1];
        for (chunk, w) in out.chunks_mut(8).zip(self.words.iter()) {
            chunk.copy_from_slice(&w.to_ne_bytes()[..chunk.len()]);
        }
        out
    }
}

/// The bytes of a SOL_TLS / TLS_SET_RECORD_TYPE cmsg carrying `record_type` (CMSG_SPACE(1)
/// bytes, the padding zeroed).
pub fn record_type_cmsg(record_type: u8) -> [u8; CMSG_SPACE_1] {
    let mut out = [0u8; CMSG_SPACE_1];
    let len = CMSG_HDR + 1;
    // cmsg_len is a size_t on glibc, a socklen_t followed by zero padding on musl: written as
    // wide as the field is, in native order.
    let level_at = std::mem::offset_of!(libc::cmsghdr, cmsg_level);
    if level_at == 8 {
        out[..8].copy_from_slice(&(len as u64).to_ne_bytes());
    } else {
        out[..4].copy_from_slice(&(len as u32).to_ne_bytes());
    }
    out[level_at..level_at + 4].copy_from_slice(&SOL_TLS.to_ne_bytes());
    let ty = std::mem::offset_of!(libc::cmsghdr, cmsg_type);
    out[ty..ty + 4].copy_from_slice(&TLS_SET_RECORD_TYPE.to_ne_bytes());
    out[CMSG_HDR] = record_type;
    out
}

/// The record type in a recvmsg control buffer (`used` bytes of it), if a SOL_TLS /
/// TLS_GET_RECORD_TYPE cmsg is there. Malformed or foreign messages are skipped, never trusted
/// for a length beyond the buffer.
pub fn parse_record_type(control: &[u8]) -> Option<u8> {
    let level_at = std::mem::offset_of!(libc::cmsghdr, cmsg_level);
    let type_at = std::mem::offset_of!(libc::cmsghdr, cmsg_type);
    let mut pos = 0;
    while control.len().saturating_sub(pos) >= CMSG_HDR {
        let hdr = &control[pos..];
        let len = read_cmsg_len(&hdr[..level_at]);
        let level = i32::from_ne_bytes(hdr[level_at..level_at + 4].try_into().ok()?);
        let ty = i32::from_ne_bytes(hdr[type_at..type_at + 4].try_into().ok()?);
        if len < CMSG_HDR || len > hdr.len() {
            return None;
        }
        if level == SOL_TLS && ty == TLS_GET_RECORD_TYPE && len > CMSG_HDR {
            return Some(hdr[CMSG_HDR]);
        }
        pos += cmsg_align(len);
    }
    None
}

/// `cmsg_len` from its field bytes (4 or 8, native order; a musl socklen_t is followed by
/// zero padding, which reads the same on little-endian machines and is skipped on big-endian).
fn read_cmsg_len(field: &[u8]) -> usize {
    match field.len() {
        8 => {
            let v = u64::from_ne_bytes(field.try_into().unwrap_or([0; 8]));
            usize::try_from(v).unwrap_or(usize::MAX)
        }
        4 => u32::from_ne_bytes(field.try_into().unwrap_or([0; 4])) as usize,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control buffer as the x86_64/aarch64 glibc kernel interface fills it for an alert
    /// record: cmsg_len = 17, cmsg_level = 282, cmsg_type = 2, data = 21, padding.
    const CAPTURED_ALERT: [u8; 24] = [
        17, 0, 0, 0, 0, 0, 0, 0, // cmsg_len (size_t)
        26, 1, 0, 0, // SOL_TLS = 282
        2, 0, 0, 0, // TLS_GET_RECORD_TYPE
        21, 0, 0, 0, 0, 0, 0, 0, // record type, padding
    ];

    #[test]
    #[cfg(all(
        target_endian = "little",
        target_pointer_width = "64",
        target_env = "gnu"
    ))]
    fn layout_matches_the_kernel() {
        assert_eq!(CMSG_SPACE_1, 24);
        assert_eq!(CMSG_HDR, 16);
        assert_eq!(parse_record_type(&CAPTURED_ALERT), Some(RECORD_ALERT));
        let built = record_type_cmsg(RECORD_HANDSHAKE);
        let mut expect = CAPTURED_ALERT;
        expect[12] = 1; // TLS_SET_RECORD_TYPE
        expect[16] = RECORD_HANDSHAKE;
        assert_eq!(built, expect);
        // SAFETY (test): the real macros agree with the arithmetic above.
        #[allow(unsafe_code)]
        let (space, len) = unsafe { (libc::CMSG_SPACE(1), libc::CMSG_LEN(1)) };
        assert_eq!(space as usize, CMSG_SPACE_1);
        assert_eq!(len as usize, CMSG_HDR + 1);
    }

    #[test]
    fn round_trip_and_garbage() {
        let mut built = record_type_cmsg(RECORD_ALERT);
        // What the kernel sends back carries TLS_GET_RECORD_TYPE.
        let ty = std::mem::offset_of!(libc::cmsghdr, cmsg_type);
        built[ty..ty + 4].copy_from_slice(&TLS_GET_RECORD_TYPE.to_ne_bytes());
        assert_eq!(parse_record_type(&built), Some(RECORD_ALERT));
        // No control data: plain application data.
        assert_eq!(parse_record_type(&[]), None);
        // A length past the buffer, a zero length, a foreign level: never trusted.
        let mut bad = built;
        bad[0] = 200;
        assert_eq!(parse_record_type(&bad), None);
        let mut zero = built;
        zero[..8].fill(0);
        assert_eq!(parse_record_type(&zero), None);
        let mut foreign = built;
        let level = std::mem::offset_of!(libc::cmsghdr, cmsg_level);
        foreign[level..level + 4].copy_from_slice(&libc::SOL_SOCKET.to_ne_bytes());
        assert_eq!(parse_record_type(&foreign), None);
        // Truncated header.
        assert_eq!(parse_record_type(&built[..10]), None);
    }

    #[test]
    fn plain_tcp_has_no_ulp() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        use std::os::fd::AsFd;
        assert_eq!(ulp_name(c.as_fd()).expect("getsockopt"), "");
    }
}
