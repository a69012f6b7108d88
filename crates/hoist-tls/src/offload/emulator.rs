//! A user-space stand-in for the kernel's TLS record layer, for tests on kernels without kTLS.
//!
//! It implements [`Sys`] over a real TCP socket and does what tls_sw does: it reads the keys
//! back out of the `tls12_crypto_info_*` bytes the transport hands to "setsockopt", encrypts
//! and decrypts real TLS records with them (so a real rustls client on the other end checks
//! every key, IV, salt and sequence number), hands out non-data records with their type, and
//! pauses reading after a KeyUpdate until a new RX key is set (as kernels >= 6.14 do).
//! Faults (errno values, short writes, no rekey, no module) are injected by configuration.
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::rc::Rc;

use aws_lc_rs::aead::{
    Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305,
};
use rustix::net::{RecvFlags, SendFlags};

use super::crypto_info::{CryptoInfo, KernelCipher, KernelVersion};
use super::records::MAX_RECORD_PAYLOAD;
use super::sys::{Direction, Received, Sys, RECORD_APPLICATION_DATA, RECORD_HANDSHAKE};

/// Which call a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    AttachUlp,
    SetTx,
    SetRx,
    Recv,
    Send,
    SendRecord,
    Sendfile,
}

/// Fail the `skip`+1-th call of `op` with `errno`.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub op: Op,
    pub skip: usize,
    pub errno: i32,
}

/// A call the transport made, for assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    AttachUlp,
    SetCrypto {
        dir: Direction,
        version: u16,
        cipher: u16,
        seq: u64,
    },
    Recv {
        record_type: u8,
        len: usize,
    },
    SendRecord {
        record_type: u8,
        data: Vec<u8>,
    },
    Send {
        len: usize,
        more: bool,
    },
    Sendfile {
        len: usize,
    },
}

pub struct Config {
    /// The kernel installs new keys on a live socket (>= 6.14).
    pub rekey: bool,
    /// At most this many bytes per send or sendfile (short writes).
    pub max_chunk: usize,
    pub faults: Vec<Fault>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            rekey: true,
            max_chunk: usize::MAX,
            faults: Vec::new(),
        }
    }
}

/// Keys and sequence number of one direction.
#[derive(Clone)]
pub struct Keys {
    pub version: KernelVersion,
    pub cipher: KernelCipher,
    key: LessSafeKeyBytes,
    iv: [u8; 12],
    pub seq: u64,
}

#[derive(Clone)]
struct LessSafeKeyBytes(Vec<u8>);

#[derive(Default)]
struct Sock {
    tx: Option<Keys>,
    rx: Option<Keys>,
    rx_paused: bool,
    aborted: Option<i32>,
    inbuf: Vec<u8>,
    plain: VecDeque<(u8, Vec<u8>)>,
    out: Vec<u8>,
    eof: bool,
}

struct Inner {
    cfg: Config,
    counts: HashMap<&'static str, usize>,
    socks: HashMap<RawFd, Sock>,
    log: Vec<Call>,
}

/// The emulated kernel, shared between the transport and the test that inspects it.
#[derive(Clone)]
pub struct Emulator(Rc<RefCell<Inner>>);

impl Emulator {
    pub fn new(cfg: Config) -> Emulator {
        Emulator(Rc::new(RefCell::new(Inner {
            cfg,
            counts: HashMap::new(),
            socks: HashMap::new(),
            log: Vec::new(),
        })))
    }

    pub fn log(&self) -> Vec<Call> {
        self.0.borrow().log.clone()
    }

    fn fault(&self, op: Op) -> io::Result<()> {
        let mut inner = self.0.borrow_mut();
        let key = match op {
            Op::AttachUlp => "ulp",
            Op::SetTx => "tx",
            Op::SetRx => "rx",
            Op::Recv => "recv",
            Op::Send => "send",
            Op::SendRecord => "record",
            Op::Sendfile => "sendfile",
        };
        let n = *inner.counts.entry(key).and_modify(|c| *c += 1).or_insert(1) - 1;
        match inner.cfg.faults.iter().find(|f| f.op == op && f.skip == n) {
            Some(f) => Err(io::Error::from_raw_os_error(f.errno)),
            None => Ok(()),
        }
    }

    fn with_sock<T>(
        &self,
        fd: RawFd,
        f: impl FnOnce(&mut Sock, &Config) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut inner = self.0.borrow_mut();
        let Inner { cfg, socks, .. } = &mut *inner;
        let sock = socks
            .get_mut(&fd)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOPROTOOPT))?;
        if let Some(errno) = sock.aborted {
            return Err(io::Error::from_raw_os_error(errno));
        }
        f(sock, cfg)
    }

    fn push_log(&self, call: Call) {
        self.0.borrow_mut().log.push(call);
    }

    /// Seals `data` as records of at most 16 KiB into the socket's output, then sends what the
    /// socket takes; Ok(false) when some is still queued.
    fn emit(&self, fd: BorrowedFd<'_>, record_type: u8, data: &[u8]) -> io::Result<()> {
        self.with_sock(fd.as_raw_fd(), |sock, _| {
            let keys = sock
                .tx
                .as_mut()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOTCONN))?;
            for chunk in data.chunks(MAX_RECORD_PAYLOAD) {
                let rec = seal(keys, record_type, chunk);
                sock.out.extend_from_slice(&rec);
            }
            Ok(())
        })?;
        match self.drain(fd) {
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Sends queued ciphertext; Ok(true) when nothing is left.
    fn drain(&self, fd: BorrowedFd<'_>) -> io::Result<bool> {
        self.with_sock(fd.as_raw_fd(), |sock, _| {
            while !sock.out.is_empty() {
                match rustix::net::send(fd, &sock.out, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
                    Ok(n) => {
                        sock.out.drain(..n);
                    }
                    Err(rustix::io::Errno::AGAIN) => return Ok(false),
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(true)
        })
    }

    /// Nothing may be accepted while older ciphertext is still queued.
    fn ready_to_send(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        if self.drain(fd)? {
            Ok(())
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
}

impl Sys for Emulator {
    fn attach_ulp(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.fault(Op::AttachUlp)?;
        self.push_log(Call::AttachUlp);
        // A descriptor number seen before belongs to a new socket now (they are reused).
        self.0
            .borrow_mut()
            .socks
            .insert(fd.as_raw_fd(), Sock::default());
        Ok(())
    }

    fn set_crypto(&self, fd: BorrowedFd<'_>, dir: Direction, info: &CryptoInfo) -> io::Result<()> {
        self.fault(match dir {
            Direction::Tx => Op::SetTx,
            Direction::Rx => Op::SetRx,
        })?;
        let keys = keys_from_bytes(info.as_bytes())?;
        self.push_log(Call::SetCrypto {
            dir,
            version: info.header().version,
            cipher: info.header().cipher_type,
            seq: keys.seq,
        });
        self.with_sock(fd.as_raw_fd(), |sock, cfg| {
            let slot = match dir {
                Direction::Tx => &mut sock.tx,
                Direction::Rx => &mut sock.rx,
            };
            if let Some(old) = slot {
                if !cfg.rekey || old.version != KernelVersion::Tls13 {
                    return Err(io::Error::from_raw_os_error(libc::EBUSY));
                }
                if old.cipher != keys.cipher || old.version != keys.version {
                    return Err(io::Error::from_raw_os_error(libc::EINVAL));
                }
            }
            *slot = Some(keys);
            if dir == Direction::Rx {
                sock.rx_paused = false;
            }
            Ok(())
        })
    }

    fn recv_record(&self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
        self.fault(Op::Recv)?;
        let got = self.with_sock(fd.as_raw_fd(), |sock, cfg| loop {
            if let Some((ty, data)) = sock.plain.front_mut() {
                let ty = *ty;
                let n = data.len().min(buf.len());
                buf[..n].copy_from_slice(&data[..n]);
                data.drain(..n);
                let done = data.is_empty();
                if done {
                    sock.plain.pop_front();
                }
                return Ok(Received {
                    len: n,
                    record_type: ty,
                    end_of_record: done && ty != RECORD_APPLICATION_DATA,
                });
            }
            if sock.rx_paused {
                return Err(io::Error::from_raw_os_error(libc::EKEYEXPIRED));
            }
            if let Some(rec) = take_record(&mut sock.inbuf) {
                let keys = sock
                    .rx
                    .as_mut()
                    .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOTCONN))?;
                match open(keys, &rec) {
                    Ok((ty, data)) => {
                        let key_update = keys.version == KernelVersion::Tls13
                            && ty == RECORD_HANDSHAKE
                            && data.first() == Some(&24);
                        if key_update && cfg.rekey {
                            sock.rx_paused = true;
                        }
                        if !data.is_empty() {
                            sock.plain.push_back((ty, data));
                        }
                        continue;
                    }
                    Err(errno) => {
                        sock.aborted = Some(errno);
                        return Err(io::Error::from_raw_os_error(errno));
                    }
                }
            }
            if sock.eof {
                return Ok(Received {
                    len: 0,
                    record_type: RECORD_APPLICATION_DATA,
                    end_of_record: false,
                });
            }
            let mut tmp = [0u8; 65536];
            match rustix::net::recv(fd, &mut tmp[..], RecvFlags::DONTWAIT) {
                Ok((_, 0)) => sock.eof = true,
                Ok((_, n)) => sock.inbuf.extend_from_slice(&tmp[..n]),
                Err(e) => return Err(e.into()),
            }
        })?;
        self.push_log(Call::Recv {
            record_type: got.record_type,
            len: got.len,
        });
        Ok(got)
    }

    fn send_record(&self, fd: BorrowedFd<'_>, record_type: u8, data: &[u8]) -> io::Result<usize> {
        self.fault(Op::SendRecord)?;
        self.ready_to_send(fd)?;
        self.push_log(Call::SendRecord {
            record_type,
            data: data.to_vec(),
        });
        self.emit(fd, record_type, data)?;
        Ok(data.len())
    }

    fn send(&self, fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>], more: bool) -> io::Result<usize> {
        self.fault(Op::Send)?;
        self.ready_to_send(fd)?;
        let max = self.0.borrow().cfg.max_chunk;
        let mut data = Vec::new();
        for b in bufs {
            let take = (max - data.len()).min(b.len());
            data.extend_from_slice(&b[..take]);
            if data.len() == max {
                break;
            }
        }
        self.push_log(Call::Send {
            len: data.len(),
            more,
        });
        self.emit(fd, RECORD_APPLICATION_DATA, &data)?;
        Ok(data.len())
    }

    fn sendfile(
        &self,
        fd: BorrowedFd<'_>,
        file: &File,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        self.fault(Op::Sendfile)?;
        self.ready_to_send(fd)?;
        let max = self.0.borrow().cfg.max_chunk;
        let mut data = vec![0u8; count.min(max).min(1 << 20)];
        let n = file.read_at(&mut data, *offset)?;
        data.truncate(n);
        self.push_log(Call::Sendfile { len: n });
        self.emit(fd, RECORD_APPLICATION_DATA, &data)?;
        *offset += n as u64;
        Ok(n)
    }

    fn flush(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ready_to_send(fd)
    }
}

/// The keys back out of a `tls12_crypto_info_*`, as the kernel reads them.
fn keys_from_bytes(b: &[u8]) -> io::Result<Keys> {
    let einval = || io::Error::from_raw_os_error(libc::EINVAL);
    let version = match u16::from_ne_bytes([b[0], b[1]]) {
        0x0303 => KernelVersion::Tls12,
        0x0304 => KernelVersion::Tls13,
        _ => return Err(einval()),
    };
    let cipher_type = u16::from_ne_bytes([b[2], b[3]]);
    let mut iv = [0u8; 12];
    let (cipher, key, seq) = match (cipher_type, b.len()) {
        (51, 40) => {
            iv[..4].copy_from_slice(&b[28..32]);
            iv[4..].copy_from_slice(&b[4..12]);
            (KernelCipher::Aes128Gcm, &b[12..28], &b[32..40])
        }
        (52, 56) => {
            iv[..4].copy_from_slice(&b[44..48]);
            iv[4..].copy_from_slice(&b[4..12]);
            (KernelCipher::Aes256Gcm, &b[12..44], &b[48..56])
        }
        (54, 56) => {
            iv.copy_from_slice(&b[4..16]);
            (KernelCipher::Chacha20Poly1305, &b[16..48], &b[48..56])
        }
        _ => return Err(einval()),
    };
    Ok(Keys {
        version,
        cipher,
        key: LessSafeKeyBytes(key.to_vec()),
        iv,
        seq: u64::from_be_bytes(seq.try_into().map_err(|_| einval())?),
    })
}

impl Keys {
    /// From a rustls secret, for the peer side of a test.
    pub fn from_secrets(
        version: rustls::ProtocolVersion,
        seq: u64,
        secrets: &rustls::ConnectionTrafficSecrets,
    ) -> Keys {
        let info = CryptoInfo::from_secrets(version, seq, secrets).unwrap();
        keys_from_bytes(info.as_bytes()).unwrap()
    }

    fn aead(&self) -> LessSafeKey {
        let alg = match self.cipher {
            KernelCipher::Aes128Gcm => &AES_128_GCM,
            KernelCipher::Aes256Gcm => &AES_256_GCM,
            KernelCipher::Chacha20Poly1305 => &CHACHA20_POLY1305,
        };
        LessSafeKey::new(UnboundKey::new(alg, &self.key.0).unwrap())
    }

    fn xor_nonce(&self) -> [u8; 12] {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        n
    }

    fn tls12_aad(&self, ty: u8, len: usize) -> [u8; 13] {
        let mut aad = [0u8; 13];
        aad[..8].copy_from_slice(&self.seq.to_be_bytes());
        aad[8] = ty;
        aad[9] = 3;
        aad[10] = 3;
        aad[11..].copy_from_slice(&(len as u16).to_be_bytes());
        aad
    }
}

/// One protected record (header included) of `ty` with `payload`.
pub fn seal(keys: &mut Keys, ty: u8, payload: &[u8]) -> Vec<u8> {
    let aead = keys.aead();
    let mut out;
    match keys.version {
        KernelVersion::Tls13 => {
            let mut inner = payload.to_vec();
            inner.push(ty);
            let len = inner.len() + 16;
            let header = [RECORD_APPLICATION_DATA, 3, 3, (len >> 8) as u8, len as u8];
            let nonce = Nonce::assume_unique_for_key(keys.xor_nonce());
            aead.seal_in_place_append_tag(nonce, Aad::from(header), &mut inner)
                .unwrap();
            out = header.to_vec();
            out.extend_from_slice(&inner);
        }
        KernelVersion::Tls12 => {
            let aad = keys.tls12_aad(ty, payload.len());
            let mut body = payload.to_vec();
            let explicit = keys.cipher != KernelCipher::Chacha20Poly1305;
            let nonce = if explicit {
                let mut n = keys.iv;
                n[4..].copy_from_slice(&keys.seq.to_be_bytes());
                n
            } else {
                keys.xor_nonce()
            };
            aead.seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut body,
            )
            .unwrap();
            let len = body.len() + if explicit { 8 } else { 0 };
            out = vec![ty, 3, 3, (len >> 8) as u8, len as u8];
            if explicit {
                out.extend_from_slice(&nonce[4..]);
            }
            out.extend_from_slice(&body);
        }
    }
    keys.seq += 1;
    out
}

/// Opens one record (header included): its type and plaintext, or the kernel's errno.
pub fn open(keys: &mut Keys, rec: &[u8]) -> Result<(u8, Vec<u8>), i32> {
    let aead = keys.aead();
    let header: [u8; 5] = rec[..5].try_into().map_err(|_| libc::EINVAL)?;
    let body = &rec[5..];
    if body.len() > MAX_RECORD_PAYLOAD + 256 + 16 + 8 {
        return Err(libc::EMSGSIZE);
    }
    let result = match keys.version {
        KernelVersion::Tls13 => {
            let mut data = body.to_vec();
            let nonce = Nonce::assume_unique_for_key(keys.xor_nonce());
            let plain = aead
                .open_in_place(nonce, Aad::from(header), &mut data)
                .map_err(|_| libc::EBADMSG)?;
            let end = plain.iter().rposition(|b| *b != 0).ok_or(libc::EBADMSG)?;
            (plain[end], plain[..end].to_vec())
        }
        KernelVersion::Tls12 => {
            let explicit = keys.cipher != KernelCipher::Chacha20Poly1305;
            let (nonce, ct) = if explicit {
                if body.len() < 8 + 16 {
                    return Err(libc::EBADMSG);
                }
                let mut n = keys.iv;
                n[4..].copy_from_slice(&body[..8]);
                (n, &body[8..])
            } else {
                (keys.xor_nonce(), body)
            };
            if ct.len() < 16 {
                return Err(libc::EBADMSG);
            }
            let aad = keys.tls12_aad(header[0], ct.len() - 16);
            let mut data = ct.to_vec();
            let plain = aead
                .open_in_place(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(aad),
                    &mut data,
                )
                .map_err(|_| libc::EBADMSG)?;
            (header[0], plain.to_vec())
        }
    };
    keys.seq += 1;
    Ok(result)
}

/// Splits the first whole record off `buf`.
pub fn take_record(buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    if buf.len() < 5 {
        return None;
    }
    let len = 5 + usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    if buf.len() < len {
        return None;
    }
    let rest = buf.split_off(len);
    Some(std::mem::replace(buf, rest))
}
