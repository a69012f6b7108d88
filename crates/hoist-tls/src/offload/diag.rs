//! Per socket: does the kernel or the NIC do the record crypto? Asked through NETLINK_SOCK_DIAG
//! (what `ss -ti` prints as `tls ... txconf: hw`): one SOCK_DIAG_BY_FAMILY request for the
//! socket's 4-tuple with INET_DIAG_INFO, whose reply nests INET_DIAG_ULP_INFO ->
//! INET_ULP_INFO_TLS -> TLS_INFO_TXCONF / TLS_INFO_RXCONF.
//!
//! The kernel includes ULP details only for a netlink socket with CAP_NET_ADMIN; without it
//! the reply has no ULP attribute and the answer is [`Diag::NoUlpInfo`]. One netlink socket per
//! thread is kept open, so a query costs a sendmsg and a recv.

use std::cell::RefCell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;

use rustix::net::{netlink, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

const NLMSG_HDR: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_REQ_V2: usize = 56;
const INET_DIAG_MSG: usize = 72;
const INET_DIAG_INFO: u8 = 2;
const INET_DIAG_ULP_INFO: u16 = 19;
const INET_ULP_INFO_NAME: u16 = 1;
const INET_ULP_INFO_TLS: u16 = 2;
const TLS_INFO_VERSION: u16 = 1;
const TLS_INFO_CIPHER: u16 = 2;
const TLS_INFO_TXCONF: u16 = 3;
const TLS_INFO_RXCONF: u16 = 4;
/// NLA_F_NESTED and NLA_F_NET_BYTEORDER live in the top bits of an attribute type.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// TLS_CONF_*: where one direction's records are processed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conf {
    /// ULP attached, no key in this direction.
    Base,
    /// The kernel's software crypto.
    Sw,
    /// The NIC (device offload).
    Hw,
    /// The NIC with full record handling (TOE).
    HwRecord,
    Unknown(u16),
}

impl Conf {
    fn from_u16(v: u16) -> Conf {
        match v {
            1 => Conf::Base,
            2 => Conf::Sw,
            3 => Conf::Hw,
            4 => Conf::HwRecord,
            n => Conf::Unknown(n),
        }
    }

    pub fn is_hw(self) -> bool {
        matches!(self, Conf::Hw | Conf::HwRecord)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Conf::Base => "base",
            Conf::Sw => "sw",
            Conf::Hw => "hw",
            Conf::HwRecord => "hw_record",
            Conf::Unknown(_) => "unknown",
        }
    }
}

/// The TLS state of one socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketTls {
    pub version: Option<u16>,
    pub cipher: Option<u16>,
    pub tx: Conf,
    pub rx: Conf,
}

/// What sock_diag said about a socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diag {
    Tls(SocketTls),
    /// A ULP other than tls is attached.
    OtherUlp(String),
    /// The socket was found but the reply carries no ULP details: no ULP attached, or the
    /// process lacks CAP_NET_ADMIN (the kernel then leaves ULP info out).
    NoUlpInfo,
}

/// Asks the kernel about the TCP socket `local` <-> `remote` (as the socket itself sees them).
pub fn query(local: SocketAddr, remote: SocketAddr) -> io::Result<Diag> {
    thread_local! {
        static SOCKET: RefCell<Option<(OwnedFd, u32)>> = const { RefCell::new(None) };
    }
    SOCKET.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let fd = rustix::net::socket_with(
                AddressFamily::NETLINK,
                SocketType::DGRAM,
                SocketFlags::CLOEXEC,
                Some(netlink::SOCK_DIAG),
            )?;
            *slot = Some((fd, 0));
        }
        let Some((fd, seq)) = slot.as_mut() else {
            return Err(io::Error::other("netlink socket missing"));
        };
        *seq = seq.wrapping_add(1);
        let req = build_request(*seq, local, remote);
        let result = exchange(fd, &req, *seq);
        if result.is_err() {
            // Start over with a fresh socket: nothing stale can be read by the next query.
            *slot = None;
        }
        result
    })
}

fn exchange(fd: &OwnedFd, req: &[u8], seq: u32) -> io::Result<Diag> {
    rustix::net::send(fd, req, SendFlags::empty())?;
    let mut buf = vec![0u8; 8192];
    // The kernel answers inside sendmsg: the reply is queued by now.
    loop {
        let (_, n) = rustix::net::recv(fd, &mut buf[..], RecvFlags::DONTWAIT)?;
        match parse_reply(&buf[..n.min(buf.len())], seq) {
            Reply::Stale => continue,
            Reply::Error(errno) => return Err(io::Error::from_raw_os_error(errno)),
            Reply::Diag(d) => return Ok(d),
            Reply::Malformed(why) => return Err(io::Error::new(io::ErrorKind::InvalidData, why)),
        }
    }
}

/// A SOCK_DIAG_BY_FAMILY request for one TCP socket, asking for INET_DIAG_INFO (under which the
/// kernel reports ULP details).
pub fn build_request(seq: u32, local: SocketAddr, remote: SocketAddr) -> Vec<u8> {
    let mut b = Vec::with_capacity(NLMSG_HDR + INET_DIAG_REQ_V2);
    b.extend_from_slice(&((NLMSG_HDR + INET_DIAG_REQ_V2) as u32).to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    let family = match local.ip() {
        IpAddr::V4(_) => libc::AF_INET as u8,
        IpAddr::V6(_) => libc::AF_INET6 as u8,
    };
    b.push(family);
    b.push(libc::IPPROTO_TCP as u8);
    b.push(1 << (INET_DIAG_INFO - 1)); // idiag_ext
    b.push(0);
    b.extend_from_slice(&u32::MAX.to_ne_bytes()); // idiag_states: all
                                                  // inet_diag_sockid: ports and addresses in network order, as the socket sees them.
    b.extend_from_slice(&local.port().to_be_bytes());
    b.extend_from_slice(&remote.port().to_be_bytes());
    b.extend_from_slice(&addr_bytes(local.ip()));
    b.extend_from_slice(&addr_bytes(remote.ip()));
    b.extend_from_slice(&0u32.to_ne_bytes()); // idiag_if
    b.extend_from_slice(&u32::MAX.to_ne_bytes()); // INET_DIAG_NOCOOKIE
    b.extend_from_slice(&u32::MAX.to_ne_bytes());
    b
}

fn addr_bytes(ip: IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out.copy_from_slice(&v6.octets()),
    }
    out
}

/// One datagram from the kernel, read.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    Diag(Diag),
    /// NLMSG_ERROR with this errno.
    Error(i32),
    /// The answer to an earlier request.
    Stale,
    Malformed(&'static str),
}

/// Reads the kernel's reply to request `seq`.
pub fn parse_reply(buf: &[u8], seq: u32) -> Reply {
    if buf.len() < NLMSG_HDR {
        return Reply::Malformed("short netlink header");
    }
    let len = u32_at(buf, 0) as usize;
    let ty = u16_at(buf, 4);
    let got_seq = u32_at(buf, 8);
    if len < NLMSG_HDR || len > buf.len() {
        return Reply::Malformed("netlink length out of bounds");
    }
    if got_seq != seq {
        return Reply::Stale;
    }
    let body = &buf[NLMSG_HDR..len];
    if ty == NLMSG_ERROR {
        if body.len() < 4 {
            return Reply::Malformed("short netlink error");
        }
        let err = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
        return Reply::Error(err.checked_neg().unwrap_or(libc::EINVAL));
    }
    if ty != SOCK_DIAG_BY_FAMILY {
        return Reply::Malformed("unexpected netlink message type");
    }
    if body.len() < INET_DIAG_MSG {
        return Reply::Malformed("short inet_diag_msg");
    }
    let Some(ulp) = attrs(&body[INET_DIAG_MSG..]).find(|(t, _)| *t == INET_DIAG_ULP_INFO) else {
        return Reply::Diag(Diag::NoUlpInfo);
    };
    let mut name = String::new();
    let mut tls = None;
    for (t, v) in attrs(ulp.1) {
        match t {
            INET_ULP_INFO_NAME => {
                let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
                name = String::from_utf8_lossy(&v[..end]).into_owned();
            }
            INET_ULP_INFO_TLS => tls = Some(v),
            _ => {}
        }
    }
    let Some(tls) = tls else {
        return Reply::Diag(if name.is_empty() || name == "tls" {
            Diag::NoUlpInfo
        } else {
            Diag::OtherUlp(name)
        });
    };
    let mut s = SocketTls {
        version: None,
        cipher: None,
        tx: Conf::Base,
        rx: Conf::Base,
    };
    for (t, v) in attrs(tls) {
        let Some(val) = (v.len() >= 2).then(|| u16::from_ne_bytes([v[0], v[1]])) else {
            continue;
        };
        match t {
            TLS_INFO_VERSION => s.version = Some(val),
            TLS_INFO_CIPHER => s.cipher = Some(val),
            TLS_INFO_TXCONF => s.tx = Conf::from_u16(val),
            TLS_INFO_RXCONF => s.rx = Conf::from_u16(val),
            _ => {}
        }
    }
    Reply::Diag(Diag::Tls(s))
}

/// Netlink attributes (u16 length, u16 type, value, padded to 4 bytes); stops at the first
/// malformed one.
fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let len = usize::from(u16_at(buf, 0));
        let ty = u16_at(buf, 2) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            buf = &[];
            return None;
        }
        let value = &buf[4..len];
        let next = ((len + 3) & !3).min(buf.len());
        buf = &buf[next..];
        Some((ty, value))
    })
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests;
