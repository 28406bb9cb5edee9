//! How the in-memory saver keys its stored values: by version text, hashed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::version::ChannelVersion;
use stategraph_value::Value;

/// version (as text) → value: hashed, as a listing looks up every channel's version of every
/// checkpoint, and a long thread's channel has hundreds of versions sharing long prefixes
/// (a tree compared them digit by digit, a dozen times a lookup).
pub(super) type VersionBlobs = HashMap<Arc<str>, Option<Value>, BuildHasherDefault<VersionHasher>>;

/// A multiply-and-rotate hash over eight bytes at a time (the Fx hash), for version texts:
/// they come from the program's own checkpoints, in one process, so a keyed hash's
/// resistance to chosen collisions buys nothing here, and it would cost more than the lookup.
#[derive(Default, Clone, Copy)]
pub(super) struct VersionHasher(u64);

impl VersionHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for VersionHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.add(u64::from_le_bytes(word.try_into().unwrap_or_default()));
        }
        for &b in words.remainder() {
            self.add(u64::from(b));
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// `version` as a stored key: a string version's text is shared, not copied.
pub(super) fn version_key(version: &ChannelVersion) -> Arc<str> {
    match version {
        ChannelVersion::Str(s) => Arc::clone(s),
        other => other.to_string().into(),
    }
}
