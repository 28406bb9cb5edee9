//! The checkpoint layer of stategraph: LangGraph's checkpoint data model, the
//! [`CheckpointSaver`] trait every backend implements, the LangGraph-compatible
//! [`JsonPlusSerializer`], the [`InMemorySaver`], saver layers ([`layer`], [`codec`],
//! [`SealedMetadataSaver`]) and the kit backends are built with ([`backend`]). The values a
//! checkpoint holds come from `stategraph-value` (re-exported here: [`Value`], [`Map`], …);
//! the shared conformance suite every saver runs is `stategraph-conformance`.
//!
//! Everything here follows LangGraph's storage format, so a checkpoint written by stategraph
//! can be read by Python LangGraph and the other way round:
//! - [`Checkpoint`] has LangGraph's fields (`v`, `id`, `ts`, `channel_values`,
//!   `channel_versions`, `versions_seen`, `updated_channels`) and is stored as the same
//!   msgpack map;
//! - checkpoint ids are time-ordered UUIDv6 strings ([`checkpoint_id`]) and channel versions
//!   are LangGraph's zero-padded strings ([`next_version`]);
//! - [`Value`] (from `stategraph-value`) is the msgpack data model, with Python objects (LangChain messages, datetimes,
//!   pydantic models) kept as [`Ext`] values that re-encode to the very same bytes.
//!
//! ```
//! use stategraph_checkpoint::*;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let saver = InMemorySaver::new();
//! let thread = CheckpointConfig::new("thread-1");
//!
//! // A first checkpoint, as a graph's input step would write it.
//! let mut cp = Checkpoint::empty();
//! cp.id = CheckpointId::for_step(-1);
//! cp.channel_values.insert("__start__".into(), value!({"foo": ""}));
//! let version = saver.get_next_version(None);
//! cp.channel_versions.insert("__start__", version.clone());
//! let new_versions = cp.channel_versions.clone();
//! let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
//! let stored = saver.put(&thread, &cp, &meta, &new_versions).await?;
//!
//! // A task's writes, saved as soon as it finishes.
//! saver
//!     .put_writes(&stored, &[("foo".into(), "a".into())], "task-1", "~__pregel_pull, node_a")
//!     .await?;
//!
//! let latest = saver.get_tuple(&thread).await?.expect("the thread has a checkpoint");
//! assert_eq!(latest.checkpoint.id, cp.id);
//! assert_eq!(latest.metadata.step, Some(-1));
//! assert_eq!(latest.pending_writes[0].value, Value::from("a"));
//! # Ok::<(), Error>(()) }).unwrap();
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]
// On docs.rs (`--cfg docsrs`, nightly), items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The features and their `##` comments in the manifest, listed.
#![doc = "\n# Feature flags\n"]
#![doc = document_features::document_features!()]

pub mod backend;
pub mod blob_layout;
pub mod cache;
mod checkpoint;
mod checkpoint_id;
pub mod codec;
mod config;
pub mod delta;
mod encrypted;
mod error;
pub mod layer;
mod memory;
mod metadata;
pub mod prune;
mod saver;
mod sealed;
mod serializer;
mod timeouts;
mod version;
pub mod version_map;
mod writes;

pub use checkpoint::{
    Checkpoint, CheckpointTuple, LATEST_VERSION, checkpoint_value_ranges, checkpoint_without_values,
};
pub use checkpoint_id::CheckpointId;
pub use config::{
    CHECKPOINT_ID, CHECKPOINT_NS, CheckpointConfig, NS_END, NS_SEP, THREAD_ID, redact_url,
};
pub use delta::{DeltaChannelHistory, DeltaWalk};
pub use encrypted::{AesEaxCipher, Cipher, EncryptedSerializer};
pub use error::{Error, Location, Result};
pub use memory::InMemorySaver;
pub use metadata::{CheckpointMetadata, CheckpointSource};
pub use saver::{
    Capabilities, CheckpointSaver, Expect, ListOptions, PruneStrategy, SaveOp, latest_conflict,
    validate_put, validate_put_writes,
};
pub use sealed::{SEALED_KEY, SealedMetadata, SealedMetadataSaver};
pub use serializer::{JsonPlusSerializer, SerdeError, Serializer, tags};
pub use version::{ChannelVersion, ChannelVersions, next_int_version, next_version};
pub use version_map::VersionsSeen;
pub use writes::{
    EncodedWrite, EncodedWrites, NULL_TASK_ID, PendingWrite, StoredWrite, all_special, channels,
    encode_writes, sort_writes, special_write_idx, write_idx,
};
// The values a checkpoint holds, from the values layer (what the types above speak in).
pub use stategraph_value::id::checkpoint_id;
pub use stategraph_value::{
    BoxError, DecodeCache, Ext, ExtCode, List, Map, PyObject, Value, format_uuid,
    iso_from_unix_micros, now_iso, uuid4, uuid6, value,
};

#[doc(hidden)]
pub use stategraph_value::__serde_json;
