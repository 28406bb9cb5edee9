//! Encryption at rest: `EncryptedSerializer`, byte-compatible with LangGraph's.
//!
//! LangGraph's `EncryptedSerializer.from_pycryptodome_aes()` tags encrypted data
//! `"<inner tag>+aes"` and stores `nonce (16) ‖ tag (16) ‖ ciphertext` of AES in EAX mode, the
//! key being the raw bytes of `LANGGRAPH_AES_KEY` (16, 24 or 32 bytes). Data without a `+` in
//! its tag is read as plaintext, so a database can hold both.
//!
//! What stays in the clear: every saver encrypts what goes through the serializer (SQLite:
//! the whole checkpoint and every write; Postgres/MySQL: blobs and writes; Redis: checkpoints
//! and writes). Checkpoint metadata stays readable everywhere, exactly as in LangGraph (it is
//! what `list(filter=…)` queries, and what Python's loop reads to continue a thread). On
//! Postgres/MySQL, LangGraph also keeps primitive channel values (None, str, numbers, bool)
//! inline in the checkpoint JSON, in the clear; [`EncryptedSerializer::encrypt_inline_values`]
//! sends them through the cipher into blob rows instead. Python reads such checkpoints and
//! continues such threads unchanged (it loads blobs for every channel), but the checkpoints
//! *Python* writes on a shared thread inline its primitives in the clear again.

use std::sync::Arc;

pub use stategraph_value::cipher::{AesEaxCipher, Cipher};
use stategraph_value::{DecodeCache, SerdeError, Value};

use crate::serializer::Serializer;

/// Wraps a serializer so that everything it writes is encrypted (tag `"<inner>+<cipher>"`);
/// reads plaintext data (no `+` in the tag) as it is.
#[derive(Clone, Debug)]
pub struct EncryptedSerializer {
    inner: Arc<dyn Serializer>,
    cipher: Arc<dyn Cipher>,
    encrypt_inline: bool,
}

impl EncryptedSerializer {
    /// `inner`'s output, encrypted with `cipher`.
    pub fn new(inner: Arc<dyn Serializer>, cipher: Arc<dyn Cipher>) -> Self {
        Self {
            inner,
            cipher,
            encrypt_inline: false,
        }
    }

    /// Also encrypts the primitive channel values LangGraph keeps inline, in the clear, in the
    /// checkpoint JSON of Postgres and MySQL: they become encrypted blob rows. Costs one blob
    /// row per changed primitive channel; Python still reads and continues the threads (see
    /// the module docs for what its own writes leave in the clear).
    pub fn encrypt_inline_values(mut self) -> Self {
        self.encrypt_inline = true;
        self
    }

    /// LangGraph's `EncryptedSerializer.from_pycryptodome_aes()`: the default serializer,
    /// AES-EAX with the key in `LANGGRAPH_AES_KEY`.
    pub fn from_env() -> Result<Self, SerdeError> {
        Ok(Self::new(
            Arc::new(crate::serializer::JsonPlusSerializer::new()),
            Arc::new(AesEaxCipher::from_env()?),
        ))
    }

    /// The default serializer, AES-EAX with `key`.
    pub fn aes(key: &[u8]) -> Result<Self, SerdeError> {
        Ok(Self::new(
            Arc::new(crate::serializer::JsonPlusSerializer::new()),
            Arc::new(AesEaxCipher::new(key)?),
        ))
    }
}

impl EncryptedSerializer {
    /// The inner serializer's tag and bytes of data stored under `type_tag`: decrypted when
    /// the tag names a cipher (`"<inner>+<cipher>"`), else (plaintext) as they are.
    fn open<'a>(
        &self,
        type_tag: &'a str,
        data: &'a [u8],
    ) -> Result<(&'a str, std::borrow::Cow<'a, [u8]>), SerdeError> {
        Ok(match type_tag.split_once('+') {
            None => (type_tag, data.into()),
            Some((inner, name)) => (inner, self.cipher.decrypt(name, data)?.into()),
        })
    }
}

impl Serializer for EncryptedSerializer {
    fn dumps_typed(&self, value: &Value) -> Result<(String, Vec<u8>), SerdeError> {
        let (tag, data) = self.inner.dumps_typed(value)?;
        let (name, ct) = self.cipher.encrypt(&data)?;
        Ok((format!("{tag}+{name}"), ct))
    }

    fn loads_typed(&self, type_tag: &str, data: &[u8]) -> Result<Value, SerdeError> {
        let (tag, plain) = self.open(type_tag, data)?;
        self.inner.loads_typed(tag, &plain)
    }

    fn loads_typed_shared(
        &self,
        type_tag: &str,
        data: &[u8],
        cache: &mut DecodeCache,
    ) -> Result<Value, SerdeError> {
        let (tag, plain) = self.open(type_tag, data)?;
        self.inner.loads_typed_shared(tag, &plain, cache)
    }

    fn loads_checkpoint(
        &self,
        type_tag: &str,
        data: &[u8],
        cache: Option<&mut DecodeCache>,
    ) -> Result<crate::Checkpoint, SerdeError> {
        let (tag, plain) = self.open(type_tag, data)?;
        self.inner.loads_checkpoint(tag, &plain, cache)
    }

    fn inline_primitives(&self) -> bool {
        !self.encrypt_inline && self.inner.inline_primitives()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value;

    #[test]
    fn inline_values_stay_plaintext_unless_asked() {
        let s = EncryptedSerializer::aes(b"0123456789abcdef").unwrap();
        assert!(s.inline_primitives(), "LangGraph's layout by default");
        assert!(!s.encrypt_inline_values().inline_primitives());
    }

    #[test]
    fn round_trip_and_layout() {
        let s = EncryptedSerializer::aes(b"0123456789abcdef0123456789abcdef").unwrap();
        let v = value!({"secret": "hello"});
        let (tag, data) = s.dumps_typed(&v).unwrap();
        assert_eq!(tag, "msgpack+aes");
        let plain = stategraph_value::encode(&v);
        assert_eq!(data.len(), 32 + plain.len(), "nonce ‖ tag ‖ ciphertext");
        assert_eq!(s.loads_typed(&tag, &data).unwrap(), v);
        assert_eq!(s.dumps_typed(&Value::Null).unwrap().0, "null+aes");
        // Plaintext rows stay readable.
        assert_eq!(s.loads_typed("msgpack", &plain).unwrap(), v);
    }

    #[test]
    fn wrong_key_and_tampering_are_errors() {
        let s = EncryptedSerializer::aes(b"0123456789abcdef").unwrap();
        let other = EncryptedSerializer::aes(b"fedcba9876543210").unwrap();
        let (tag, mut data) = s.dumps_typed(&Value::from("x")).unwrap();
        assert!(matches!(
            other.loads_typed(&tag, &data),
            Err(SerdeError::Cipher { .. })
        ));
        let last = data.len() - 1;
        data[last] ^= 1;
        assert!(matches!(
            s.loads_typed(&tag, &data),
            Err(SerdeError::Cipher { .. })
        ));
        assert!(matches!(
            s.loads_typed(&tag, &data[..10]),
            Err(SerdeError::Cipher { .. })
        ));
        assert!(AesEaxCipher::new(b"short").is_err());
    }
}
