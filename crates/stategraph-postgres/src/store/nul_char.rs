//! PostgreSQL's `text` and `jsonb` cannot hold the character U+0000: a put or a filter that
//! carries one (a delete's key included) is the caller's error, named before anything is sent
//! (the server's own error would say only that a byte sequence is invalid, and not where). A
//! get by a key with U+0000 finds nothing: no such item can have been stored.

use stategraph_store::{Op, StoreError};

use crate::nul_char::nul_at;

/// Refuses the puts and searches of `ops` that carry U+0000, naming where.
pub(super) fn refuse_nul(ops: &[Op]) -> Result<(), StoreError> {
    for op in ops {
        match op {
            Op::Put(p) => {
                let at = if p.key.contains('\0') {
                    Some("the key".to_owned())
                } else {
                    p.value
                        .as_ref()
                        .and_then(|v| nul_at(v, "value"))
                        .map(|path| format!("`{path}`"))
                };
                if let Some(at) = at {
                    return Err(StoreError::InvalidValue {
                        namespace: p.namespace.clone(),
                        key: p.key.clone(),
                        reason: format!("{at} contains U+0000, which PostgreSQL cannot store"),
                    });
                }
            }
            Op::Search(s) => {
                for (key, value) in s.filter.iter().flatten() {
                    if key.contains('\0') || nul_at(value, key).is_some() {
                        return Err(StoreError::InvalidFilter {
                            key: key.clone(),
                            reason: "contains U+0000, which PostgreSQL cannot store".into(),
                        });
                    }
                }
            }
            Op::Get(_) | Op::ListNamespaces(_) => {}
        }
    }
    Ok(())
}

/// Whether `key` can name a stored item (it cannot if it holds U+0000).
pub(super) fn storable_key(key: &str) -> bool {
    !key.contains('\0')
}
