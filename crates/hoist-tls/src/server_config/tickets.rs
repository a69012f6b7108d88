//! Session ticket encryption for `session_ticket_keys`, and the switch that turns tickets off.
//!
//! Envoy's keys are 80 bytes: a 16-byte key name, then 64 bytes of secret (BoringSSL splits them
//! into an HMAC-SHA256 key and an AES-256-CBC key). hoist keeps the operator's format and the
//! "first key encrypts, all keys decrypt" rotation, but seals tickets with AES-256-GCM:
//!
//! - AEAD key = HKDF-SHA256(salt = key name, ikm = bytes 16..80, info = "hoist session ticket
//!   key v1"), 32 bytes;
//! - ticket = key name (16) || nonce (12, random) || ciphertext || tag (16); AAD = key name.
//!
//! A ticket sealed by Envoy therefore does not open in hoist (and the reverse): after a
//! migration clients fall back to a full handshake once. Random 96-bit nonces keep the
//! collision risk negligible up to about 2^32 tickets per key; rotate keys well before that.

use std::fmt;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hkdf::{Salt, HKDF_SHA256};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

pub(crate) const KEY_LEN: usize = 80;
const NAME_LEN: usize = 16;
const TAG_LEN: usize = 16;
const HKDF_INFO: &[u8] = b"hoist session ticket key v1";

/// How long clients may keep a ticket, as a hint: BoringSSL's default session timeout (2 h).
/// Lifetime is enforced by rotating keys, not by this number.
const LIFETIME_SECS: u32 = 7200;

struct TicketKey {
    name: [u8; NAME_LEN],
    aead: LessSafeKey,
}

/// `session_ticket_keys`: the first key seals, every key opens.
pub(crate) struct TicketKeys {
    keys: Vec<TicketKey>,
    rng: SystemRandom,
}

impl fmt::Debug for TicketKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secrets; the names are public (they travel in every ticket).
        f.debug_struct("TicketKeys")
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl TicketKeys {
    /// Builds the keys; `Err` carries the index of a key of the wrong length.
    pub(crate) fn new(raw: &[Vec<u8>]) -> Result<TicketKeys, (usize, String)> {
        let mut keys = Vec::with_capacity(raw.len());
        for (i, k) in raw.iter().enumerate() {
            if k.len() != KEY_LEN {
                return Err((
                    i,
                    format!(
                        "a session ticket key must be {KEY_LEN} bytes, got {}",
                        k.len()
                    ),
                ));
            }
            let mut name = [0u8; NAME_LEN];
            name.copy_from_slice(&k[..NAME_LEN]);
            let prk = Salt::new(HKDF_SHA256, &name).extract(&k[NAME_LEN..]);
            let info = [HKDF_INFO];
            let okm = prk
                .expand(&info, &AES_256_GCM)
                .map_err(|_| (i, "cannot derive the ticket key".to_string()))?;
            keys.push(TicketKey {
                name,
                aead: LessSafeKey::new(UnboundKey::from(okm)),
            });
        }
        if keys.is_empty() {
            return Err((0, "no session ticket key".into()));
        }
        Ok(TicketKeys {
            keys,
            rng: SystemRandom::new(),
        })
    }
}

impl ProducesTickets for TicketKeys {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME_SECS
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let key = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut ticket = Vec::with_capacity(NAME_LEN + NONCE_LEN + plain.len() + TAG_LEN);
        ticket.extend_from_slice(&key.name);
        ticket.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        key.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&key.name),
                &mut sealed,
            )
            .ok()?;
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        if cipher.len() < NAME_LEN + NONCE_LEN + TAG_LEN {
            return None;
        }
        let (name, rest) = cipher.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let key = self.keys.iter().find(|k| k.name == name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain_len = key
            .aead
            .open_in_place(nonce, Aad::from(&key.name), &mut buf)
            .ok()?
            .len();
        buf.truncate(plain_len);
        Some(buf)
    }
}

/// `disable_stateless_session_resumption: true`: rustls then neither sends nor accepts tickets
/// (the stateful session cache still works).
#[derive(Debug)]
pub(crate) struct NoTickets;

impl ProducesTickets for NoTickets {
    fn enabled(&self) -> bool {
        false
    }

    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, _plain: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn decrypt(&self, _cipher: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(fill: u8) -> Vec<u8> {
        (0..KEY_LEN as u8)
            .map(|i| i.wrapping_mul(7) ^ fill)
            .collect()
    }

    #[test]
    fn first_key_seals_all_keys_open() {
        let old = TicketKeys::new(&[key(1)]).unwrap();
        let rotated = TicketKeys::new(&[key(2), key(1)]).unwrap();
        let t = old.encrypt(b"session state").unwrap();
        assert_eq!(rotated.decrypt(&t).unwrap(), b"session state");
        let t2 = rotated.encrypt(b"new").unwrap();
        assert_eq!(&t2[..NAME_LEN], &key(2)[..NAME_LEN]);
        assert!(old.decrypt(&t2).is_none());
    }

    #[test]
    fn tampering_and_short_input_fail() {
        let k = TicketKeys::new(&[key(3)]).unwrap();
        let mut t = k.encrypt(b"abc").unwrap();
        for i in [0, NAME_LEN, NAME_LEN + NONCE_LEN, t.len() - 1] {
            t[i] ^= 1;
            assert!(k.decrypt(&t).is_none(), "flip at {i}");
            t[i] ^= 1;
        }
        assert_eq!(k.decrypt(&t).unwrap(), b"abc");
        for n in 0..t.len() {
            assert!(k.decrypt(&t[..n]).is_none());
        }
        // Two tickets of the same state differ (fresh nonces).
        assert_ne!(k.encrypt(b"abc").unwrap(), t);
    }

    #[test]
    fn same_secret_different_name_is_a_different_key() {
        let a = key(4);
        let mut b = a.clone();
        b[0] ^= 0xff;
        let ka = TicketKeys::new(&[a]).unwrap();
        let kb = TicketKeys::new(&[b.clone()]).unwrap();
        let mut t = ka.encrypt(b"x").unwrap();
        t[..NAME_LEN].copy_from_slice(&b[..NAME_LEN]);
        assert!(kb.decrypt(&t).is_none());
    }

    #[test]
    fn wrong_length_is_refused() {
        assert_eq!(TicketKeys::new(&[key(0), vec![0; 48]]).unwrap_err().0, 1);
        assert!(TicketKeys::new(&[]).is_err());
    }
}
