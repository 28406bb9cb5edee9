//! Encryption of serialized bytes: the [`Cipher`] trait (LangGraph's `CipherProtocol`) and
//! [`AesEaxCipher`], byte-compatible with LangGraph's pycryptodome AES-EAX; and the hexadecimal
//! form sealed values are stored in.

use std::fmt;

use aes::{Aes128, Aes192, Aes256};
use eax::Eax;
use eax::aead::{Aead, KeyInit, Payload};

use crate::SerdeError;

/// The metadata key holding the sealed keys.
pub const SEALED_KEY: &str = "__stategraph_sealed__";

/// Encrypts and decrypts serialized bytes (LangGraph's `CipherProtocol`).
pub trait Cipher: Send + Sync + fmt::Debug {
    /// Encrypts `plaintext`, returning the cipher's name (appended to the type tag) and bytes.
    fn encrypt(&self, plaintext: &[u8]) -> Result<(String, Vec<u8>), SerdeError>;
    /// Decrypts bytes written by a cipher named `name`.
    fn decrypt(&self, name: &str, ciphertext: &[u8]) -> Result<Vec<u8>, SerdeError>;
}

/// AES in EAX mode with a 16-byte random nonce and 16-byte tag, as pycryptodome does it.
#[derive(Clone)]
pub struct AesEaxCipher {
    key: Vec<u8>,
}

impl fmt::Debug for AesEaxCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AesEaxCipher(AES-{})", self.key.len() * 8)
    }
}

fn cipher_error(message: impl Into<String>) -> SerdeError {
    SerdeError::Cipher {
        message: message.into(),
    }
}

impl AesEaxCipher {
    /// A cipher with a raw 16-, 24- or 32-byte key.
    pub fn new(key: &[u8]) -> Result<Self, SerdeError> {
        match key.len() {
            16 | 24 | 32 => Ok(Self { key: key.to_vec() }),
            n => Err(cipher_error(format!(
                "an AES key is 16, 24 or 32 bytes, this one has {n}"
            ))),
        }
    }

    /// The key in `LANGGRAPH_AES_KEY` (its raw bytes, as LangGraph reads it).
    pub fn from_env() -> Result<Self, SerdeError> {
        let key = std::env::var_os("LANGGRAPH_AES_KEY")
            .ok_or_else(|| cipher_error("LANGGRAPH_AES_KEY is not set"))?;
        let key = key
            .into_string()
            .map_err(|_| cipher_error("LANGGRAPH_AES_KEY is not valid UTF-8"))?;
        Self::new(key.as_bytes())
    }
}

/// Seals with EAX over the AES variant `$aes`: `nonce ‖ tag ‖ ciphertext`.
macro_rules! seal {
    ($aes:ty, $key:expr, $plaintext:expr) => {{
        let cipher = Eax::<$aes>::new_from_slice($key).map_err(|_| cipher_error("bad key"))?;
        let mut nonce = [0u8; 16];
        for b in &mut nonce {
            *b = fastrand::u8(..);
        }
        let sealed = cipher
            .encrypt(
                &eax::aead::Nonce::<Eax<$aes>>::from(nonce),
                Payload {
                    msg: $plaintext,
                    aad: b"",
                },
            )
            .map_err(|_| cipher_error("encryption failed"))?;
        // RustCrypto returns ciphertext ‖ tag; LangGraph stores nonce ‖ tag ‖ ciphertext.
        let (ct, tag) = sealed.split_at(sealed.len() - 16);
        let mut out = Vec::with_capacity(32 + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(tag);
        out.extend_from_slice(ct);
        out
    }};
}

/// Opens `nonce ‖ tag ‖ ciphertext` with EAX over `$aes`.
macro_rules! open {
    ($aes:ty, $key:expr, $data:expr) => {{
        let data: &[u8] = $data;
        if data.len() < 32 {
            return Err(cipher_error(format!(
                "encrypted data is {} bytes, shorter than its 32-byte nonce and tag",
                data.len()
            )));
        }
        let (nonce, rest) = data.split_at(16);
        let (tag, ct) = rest.split_at(16);
        let mut sealed = Vec::with_capacity(ct.len() + 16);
        sealed.extend_from_slice(ct);
        sealed.extend_from_slice(tag);
        let cipher = Eax::<$aes>::new_from_slice($key).map_err(|_| cipher_error("bad key"))?;
        cipher
            .decrypt(
                &eax::aead::Nonce::<Eax<$aes>>::try_from(nonce)
                    .map_err(|_| cipher_error("bad nonce"))?,
                Payload {
                    msg: &sealed,
                    aad: b"",
                },
            )
            .map_err(|_| {
                cipher_error("authentication failed: wrong key, or the data was altered")
            })?
    }};
}

impl Cipher for AesEaxCipher {
    fn encrypt(&self, plaintext: &[u8]) -> Result<(String, Vec<u8>), SerdeError> {
        let data = match self.key.len() {
            16 => seal!(Aes128, &self.key, plaintext),
            24 => seal!(Aes192, &self.key, plaintext),
            _ => seal!(Aes256, &self.key, plaintext),
        };
        Ok(("aes".to_owned(), data))
    }

    fn decrypt(&self, name: &str, ciphertext: &[u8]) -> Result<Vec<u8>, SerdeError> {
        if name != "aes" {
            return Err(cipher_error(format!(
                "data is encrypted with `{name}`, not `aes`"
            )));
        }
        Ok(match self.key.len() {
            16 => open!(Aes128, &self.key, ciphertext),
            24 => open!(Aes192, &self.key, ciphertext),
            _ => open!(Aes256, &self.key, ciphertext),
        })
    }
}

/// `bytes` as lowercase hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lowercase or uppercase hexadecimal `text`; `None` if it is not hexadecimal.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}
