//! The kernel's `tls12_crypto_info_*` structures (include/uapi/linux/tls.h), built from the
//! secrets rustls hands over. TLS 1.2 and 1.3 use the same structures; only `version` differs.
//!
//! From rustls' 12-byte IV: AES-GCM puts its first 4 bytes in `salt` and the other 8 in `iv`;
//! ChaCha20-Poly1305 has no salt and takes all 12 in `iv`. `rec_seq` is the next record
//! sequence number, big-endian. Key copies are zeroized when the value is dropped.

use std::fmt;

use rustls::{ConnectionTrafficSecrets, ProtocolVersion};
use zeroize::Zeroize;

/// `TLS_1_2_VERSION`, `TLS_1_3_VERSION`.
pub const TLS_1_2_VERSION: u16 = 0x0303;
pub const TLS_1_3_VERSION: u16 = 0x0304;
/// `TLS_CIPHER_*`.
pub const TLS_CIPHER_AES_GCM_128: u16 = 51;
pub const TLS_CIPHER_AES_GCM_256: u16 = 52;
pub const TLS_CIPHER_CHACHA20_POLY1305: u16 = 54;

/// `struct tls_crypto_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlsCryptoInfo {
    pub version: u16,
    pub cipher_type: u16,
}

/// `struct tls12_crypto_info_aes_gcm_128`.
#[repr(C)]
#[derive(Clone)]
pub struct Tls12CryptoInfoAesGcm128 {
    pub info: TlsCryptoInfo,
    pub iv: [u8; 8],
    pub key: [u8; 16],
    pub salt: [u8; 4],
    pub rec_seq: [u8; 8],
}

/// `struct tls12_crypto_info_aes_gcm_256`.
#[repr(C)]
#[derive(Clone)]
pub struct Tls12CryptoInfoAesGcm256 {
    pub info: TlsCryptoInfo,
    pub iv: [u8; 8],
    pub key: [u8; 32],
    pub salt: [u8; 4],
    pub rec_seq: [u8; 8],
}

/// `struct tls12_crypto_info_chacha20_poly1305` (its salt is a zero-length array).
#[repr(C)]
#[derive(Clone)]
pub struct Tls12CryptoInfoChacha20Poly1305 {
    pub info: TlsCryptoInfo,
    pub iv: [u8; 12],
    pub key: [u8; 32],
    pub rec_seq: [u8; 8],
}

// The sizes the kernel checks optlen against (tls_main.c, do_tls_setsockopt_conf). With only
// byte arrays after two u16s there is no padding anywhere, so the bytes are the fields.
const _: () = assert!(std::mem::size_of::<TlsCryptoInfo>() == 4);
const _: () = assert!(std::mem::size_of::<Tls12CryptoInfoAesGcm128>() == 40);
const _: () = assert!(std::mem::size_of::<Tls12CryptoInfoAesGcm256>() == 56);
const _: () = assert!(std::mem::size_of::<Tls12CryptoInfoChacha20Poly1305>() == 56);

/// The kernel's cipher for one direction of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelCipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl KernelCipher {
    pub const ALL: [KernelCipher; 3] = [
        KernelCipher::Aes128Gcm,
        KernelCipher::Aes256Gcm,
        KernelCipher::Chacha20Poly1305,
    ];

    /// As the probe line and /tls_offload spell it.
    pub fn name(self) -> &'static str {
        match self {
            KernelCipher::Aes128Gcm => "AES-128-GCM",
            KernelCipher::Aes256Gcm => "AES-256-GCM",
            KernelCipher::Chacha20Poly1305 => "CHACHA20-POLY1305",
        }
    }

    fn key_len(self) -> usize {
        match self {
            KernelCipher::Aes128Gcm => 16,
            KernelCipher::Aes256Gcm | KernelCipher::Chacha20Poly1305 => 32,
        }
    }
}

/// The TLS versions the kernel takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelVersion {
    Tls12,
    Tls13,
}

impl KernelVersion {
    pub const ALL: [KernelVersion; 2] = [KernelVersion::Tls12, KernelVersion::Tls13];

    pub fn from_rustls(v: ProtocolVersion) -> Option<KernelVersion> {
        match v {
            ProtocolVersion::TLSv1_2 => Some(KernelVersion::Tls12),
            ProtocolVersion::TLSv1_3 => Some(KernelVersion::Tls13),
            _ => None,
        }
    }

    /// "TLSv1.2", "TLSv1.3", as Envoy's stats spell versions.
    pub fn name(self) -> &'static str {
        match self {
            KernelVersion::Tls12 => "TLSv1.2",
            KernelVersion::Tls13 => "TLSv1.3",
        }
    }

    fn number(self) -> u16 {
        match self {
            KernelVersion::Tls12 => TLS_1_2_VERSION,
            KernelVersion::Tls13 => TLS_1_3_VERSION,
        }
    }
}

/// Why secrets cannot become a kernel structure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsupported {
    Version(ProtocolVersion),
    /// A cipher the kernel structures do not cover (a future rustls variant).
    Cipher,
    /// A key of the wrong length for its cipher.
    KeyLength(usize),
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::Version(v) => write!(f, "TLS version {v:?} has no kernel offload"),
            Unsupported::Cipher => f.write_str("cipher has no kernel offload"),
            Unsupported::KeyLength(n) => write!(f, "unexpected key length {n}"),
        }
    }
}

/// One direction's crypto state for `setsockopt(SOL_TLS, TLS_TX | TLS_RX)`.
pub enum CryptoInfo {
    Aes128Gcm(Tls12CryptoInfoAesGcm128),
    Aes256Gcm(Tls12CryptoInfoAesGcm256),
    Chacha20Poly1305(Tls12CryptoInfoChacha20Poly1305),
}

impl CryptoInfo {
    /// From the (sequence number, secrets) pair rustls extracted for one direction.
    pub fn from_secrets(
        version: ProtocolVersion,
        seq: u64,
        secrets: &ConnectionTrafficSecrets,
    ) -> Result<CryptoInfo, Unsupported> {
        let v = KernelVersion::from_rustls(version).ok_or(Unsupported::Version(version))?;
        let (cipher, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
                (KernelCipher::Aes128Gcm, key.as_ref(), iv.as_ref())
            }
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
                (KernelCipher::Aes256Gcm, key.as_ref(), iv.as_ref())
            }
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (KernelCipher::Chacha20Poly1305, key.as_ref(), iv.as_ref())
            }
            _ => return Err(Unsupported::Cipher),
        };
        let iv: &[u8; 12] = iv
            .try_into()
            .map_err(|_| Unsupported::KeyLength(iv.len()))?;
        CryptoInfo::new(v, cipher, key, iv, seq)
    }

    /// From raw material: `key` of the cipher's length, the 12-byte IV, the next sequence
    /// number.
    pub fn new(
        version: KernelVersion,
        cipher: KernelCipher,
        key: &[u8],
        iv: &[u8; 12],
        seq: u64,
    ) -> Result<CryptoInfo, Unsupported> {
        if key.len() != cipher.key_len() {
            return Err(Unsupported::KeyLength(key.len()));
        }
        let info = |cipher_type| TlsCryptoInfo {
            version: version.number(),
            cipher_type,
        };
        let rec_seq = seq.to_be_bytes();
        let mut salt = [0u8; 4];
        salt.copy_from_slice(&iv[..4]);
        let mut explicit = [0u8; 8];
        explicit.copy_from_slice(&iv[4..]);
        Ok(match cipher {
            KernelCipher::Aes128Gcm => {
                let mut k = [0u8; 16];
                k.copy_from_slice(key);
                CryptoInfo::Aes128Gcm(Tls12CryptoInfoAesGcm128 {
                    info: info(TLS_CIPHER_AES_GCM_128),
                    iv: explicit,
                    key: k,
                    salt,
                    rec_seq,
                })
            }
            KernelCipher::Aes256Gcm => {
                let mut k = [0u8; 32];
                k.copy_from_slice(key);
                CryptoInfo::Aes256Gcm(Tls12CryptoInfoAesGcm256 {
                    info: info(TLS_CIPHER_AES_GCM_256),
                    iv: explicit,
                    key: k,
                    salt,
                    rec_seq,
                })
            }
            KernelCipher::Chacha20Poly1305 => {
                let mut k = [0u8; 32];
                k.copy_from_slice(key);
                CryptoInfo::Chacha20Poly1305(Tls12CryptoInfoChacha20Poly1305 {
                    info: info(TLS_CIPHER_CHACHA20_POLY1305),
                    iv: *iv,
                    key: k,
                    rec_seq,
                })
            }
        })
    }

    pub fn cipher(&self) -> KernelCipher {
        match self {
            CryptoInfo::Aes128Gcm(_) => KernelCipher::Aes128Gcm,
            CryptoInfo::Aes256Gcm(_) => KernelCipher::Aes256Gcm,
            CryptoInfo::Chacha20Poly1305(_) => KernelCipher::Chacha20Poly1305,
        }
    }

    pub fn header(&self) -> TlsCryptoInfo {
        match self {
            CryptoInfo::Aes128Gcm(c) => c.info,
            CryptoInfo::Aes256Gcm(c) => c.info,
            CryptoInfo::Chacha20Poly1305(c) => c.info,
        }
    }

    /// The structure as the bytes setsockopt passes to the kernel.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            CryptoInfo::Aes128Gcm(c) => struct_bytes(c),
            CryptoInfo::Aes256Gcm(c) => struct_bytes(c),
            CryptoInfo::Chacha20Poly1305(c) => struct_bytes(c),
        }
    }
}

/// Never prints key material.
impl fmt::Debug for CryptoInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = self.header();
        f.debug_struct("CryptoInfo")
            .field("version", &format_args!("{:#06x}", h.version))
            .field("cipher_type", &h.cipher_type)
            .finish_non_exhaustive()
    }
}

impl Drop for CryptoInfo {
    fn drop(&mut self) {
        match self {
            CryptoInfo::Aes128Gcm(c) => {
                c.key.zeroize();
                c.iv.zeroize();
                c.salt.zeroize();
            }
            CryptoInfo::Aes256Gcm(c) => {
                c.key.zeroize();
                c.iv.zeroize();
                c.salt.zeroize();
            }
            CryptoInfo::Chacha20Poly1305(c) => {
                c.key.zeroize();
                c.iv.zeroize();
            }
        }
    }
}

/// Marker for the padding-free `#[repr(C)]` structures above.
trait PlainStruct: Sized {}
impl PlainStruct for Tls12CryptoInfoAesGcm128 {}
impl PlainStruct for Tls12CryptoInfoAesGcm256 {}
impl PlainStruct for Tls12CryptoInfoChacha20Poly1305 {}

fn struct_bytes<T: PlainStruct>(value: &T) -> &[u8] {
    // SAFETY: T is one of the #[repr(C)] structures above, made of u16 and u8 arrays with no
    // padding (their sizes are asserted at compile time to be the sums of their fields), so
    // every one of its size_of::<T>() bytes is initialized; the slice borrows `value`.
    #[allow(unsafe_code)]
    unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv() -> [u8; 12] {
        [
            0xa0, 0xa1, 0xa2, 0xa3, 0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7,
        ]
    }

    #[test]
    fn aes_gcm_128_layout() {
        let key: Vec<u8> = (1..=16).collect();
        let info = CryptoInfo::new(
            KernelVersion::Tls12,
            KernelCipher::Aes128Gcm,
            &key,
            &iv(),
            0x0102_0304_0506_0708,
        )
        .expect("info");
        let mut expect = Vec::new();
        expect.extend_from_slice(&0x0303u16.to_ne_bytes());
        expect.extend_from_slice(&51u16.to_ne_bytes());
        expect.extend_from_slice(&[0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7]); // iv
        expect.extend_from_slice(&key);
        expect.extend_from_slice(&[0xa0, 0xa1, 0xa2, 0xa3]); // salt
        expect.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]); // rec_seq, big-endian
        assert_eq!(info.as_bytes(), &expect[..]);
        assert_eq!(info.as_bytes().len(), 40);
    }

    #[test]
    fn aes_gcm_256_layout() {
        let key = [0x42u8; 32];
        let info = CryptoInfo::new(
            KernelVersion::Tls13,
            KernelCipher::Aes256Gcm,
            &key,
            &iv(),
            3,
        )
        .expect("info");
        let b = info.as_bytes();
        assert_eq!(b.len(), 56);
        assert_eq!(&b[..2], &0x0304u16.to_ne_bytes());
        assert_eq!(&b[2..4], &52u16.to_ne_bytes());
        assert_eq!(&b[4..12], &iv()[4..]);
        assert_eq!(&b[12..44], &key);
        assert_eq!(&b[44..48], &iv()[..4]);
        assert_eq!(&b[48..], &[0, 0, 0, 0, 0, 0, 0, 3]);
    }

    #[test]
    fn chacha_layout() {
        let key: Vec<u8> = (100..132).collect();
        let info = CryptoInfo::new(
            KernelVersion::Tls13,
            KernelCipher::Chacha20Poly1305,
            &key,
            &iv(),
            u64::MAX,
        )
        .expect("info");
        let b = info.as_bytes();
        assert_eq!(b.len(), 56);
        assert_eq!(&b[2..4], &54u16.to_ne_bytes());
        assert_eq!(&b[4..16], &iv());
        assert_eq!(&b[16..48], &key[..]);
        assert_eq!(&b[48..], &[0xff; 8]);
        assert_eq!(info.cipher(), KernelCipher::Chacha20Poly1305);
        assert!(!format!("{info:?}").contains("100"));
    }

    #[test]
    fn wrong_lengths_and_versions() {
        assert_eq!(
            CryptoInfo::new(
                KernelVersion::Tls12,
                KernelCipher::Aes128Gcm,
                &[0; 32],
                &iv(),
                0
            )
            .err(),
            Some(Unsupported::KeyLength(32))
        );
        let secrets = ConnectionTrafficSecrets::Aes256Gcm {
            key: rustls::crypto::cipher::AeadKey::from([7u8; 32]),
            iv: rustls::crypto::cipher::Iv::new(iv()),
        };
        assert!(matches!(
            CryptoInfo::from_secrets(ProtocolVersion::TLSv1_1, 0, &secrets),
            Err(Unsupported::Version(_))
        ));
        let info =
            CryptoInfo::from_secrets(ProtocolVersion::TLSv1_2, 9, &secrets).expect("from secrets");
        assert_eq!(info.cipher(), KernelCipher::Aes256Gcm);
        assert_eq!(&info.as_bytes()[12..44], &[7u8; 32]);
        assert_eq!(info.as_bytes()[55], 9);
    }
}
