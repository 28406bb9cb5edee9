//! The shared conformance suites of stategraph, for backends' tests: one for every
//! [`CheckpointSaver`] (this module), one for every `Store` ([`store`]), one for every run queue
//! ([`runs`]), one for every node cache ([`cache`]). Each behaviour is specified once, here, as one `pub async fn`; a backend runs a
//! whole suite with one macro line.
//!
//! The checkpointer suite follows LangGraph's checkpoint conformance spec (`langgraph-checkpoint-conformance`), plus a
//! few stategraph contracts (typed errors, write ordering, rich values).
//!
//! A backend runs all of it with one macro line in an integration test:
//!
//! ```text
//! async fn fixture() -> stategraph_conformance::Fixture {
//!     let scratch = MyScratchDatabase::new();        // dropped when the fixture is
//!     Fixture::new(MySaver::connect(&scratch).await)
//!         .with_corruptor(MyRows::on(&scratch))      // direct access to the stored bytes
//!         .with_guard(scratch)
//! }
//! stategraph_conformance::checkpointer_conformance!(fixture);
//! ```
//!
//! Every case gets a fresh fixture and uses its own thread ids. Cases for optional operations
//! check [`CheckpointSaver::capabilities`]: a declared capability is tested in full; an
//! undeclared one must fail with [`Error::Unsupported`](stategraph_checkpoint::Error::Unsupported). Nothing
//! is skipped.

// Assertions are the point of this module (and its submodules); a failed one panics with a
// message naming the case.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::string_slice,
    missing_docs
)]

use std::any::Any;

use stategraph_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointId,
    CheckpointMetadata, CheckpointSaver, CheckpointSource, CheckpointTuple, Value, now_iso, uuid6,
};

/// Runs the rest of an extended case only if the saver declares `$cap`; otherwise checks that
/// `$probe` fails with `Unsupported`.
macro_rules! require {
    ($saver:expr, $cap:ident, $probe:expr) => {
        if !$saver.capabilities().$cap {
            $crate::assert_unsupported($probe.await, stringify!($cap));
            return;
        }
    };
}

pub mod cache;
mod copy_thread;
mod delete_for_runs;
mod delete_thread;
mod delta_history;
mod extras;
mod get_tuple;
mod integrity;
mod list;
mod prune;
mod put;
mod put_writes;
pub mod runs;
pub mod store;

pub use copy_thread::*;
pub use delete_for_runs::*;
pub use delete_thread::*;
pub use delta_history::*;
pub use extras::*;
pub use get_tuple::*;
pub use integrity::*;
pub use list::*;
pub use prune::*;
pub use put::*;
pub use put_writes::*;

/// A saver under test, plus anything that must live as long as it (a temporary directory, a
/// scratch schema).
pub struct Fixture {
    saver: Box<dyn CheckpointSaver>,
    corruptor: Option<Box<dyn Corruptor>>,
    no_corruptor: Option<&'static str>,
    _guard: Option<Box<dyn Any + Send>>,
}

impl Fixture {
    /// A fixture around `saver`.
    pub fn new(saver: impl CheckpointSaver + 'static) -> Self {
        Self {
            saver: Box::new(saver),
            corruptor: None,
            no_corruptor: None,
            _guard: None,
        }
    }

    /// Gives the cases that damage stored rows direct access to the saver's storage. Every
    /// saver that stores bytes must provide one (only the in-memory saver, which keeps
    /// decoded values, has none).
    pub fn with_corruptor(mut self, corruptor: impl Corruptor + 'static) -> Self {
        self.corruptor = Some(Box::new(corruptor));
        self
    }

    /// Declares, with the reason, that this fixture cannot reach its saver's storage (a
    /// private in-memory database): the cases that damage rows run on another fixture of the
    /// same saver instead.
    pub fn without_corruptor(mut self, reason: &'static str) -> Self {
        self.no_corruptor = Some(reason);
        self
    }

    /// Why the fixture has no [`Corruptor`], if it declared so.
    pub fn corruptor_exemption(&self) -> Option<&'static str> {
        self.no_corruptor
    }

    /// The fixture's [`Corruptor`], if any.
    pub fn corruptor(&self) -> Option<&dyn Corruptor> {
        self.corruptor.as_deref()
    }

    /// Keeps `guard` alive until the fixture is dropped.
    pub fn with_guard(mut self, guard: impl Any + Send) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// The saver.
    pub fn saver(&self) -> &dyn CheckpointSaver {
        self.saver.as_ref()
    }
}

/// Expands to one `#[tokio::test]` per conformance case, each calling `$factory().await` for a
/// fresh [`Fixture`]. The list of cases lives here, once, so no backend can miss one.
#[macro_export]
macro_rules! checkpointer_conformance {
    ($factory:path) => {
        $crate::__conformance_cases!($factory;
            // put
            put_returns_config, put_roundtrip, put_preserves_channel_values,
            put_preserves_channel_versions, put_preserves_versions_seen, put_preserves_metadata,
            put_root_namespace, put_child_namespace, put_default_namespace,
            put_multiple_checkpoints_same_thread, put_multiple_threads_isolated, put_parent_config,
            put_incremental_channel_update, put_new_channel_added, put_channel_removed,
            put_preserves_run_id, put_preserves_versions_seen_values,
            // put_writes
            put_writes_basic, put_writes_multiple_writes_same_task, put_writes_multiple_tasks,
            put_writes_preserves_task_id, put_writes_preserves_channel_and_value,
            put_writes_task_path, put_writes_idempotent, put_writes_special_channels,
            put_writes_across_namespaces, put_writes_cleared_on_next_checkpoint,
            // get_tuple
            get_tuple_nonexistent_returns_none, get_tuple_latest_when_no_checkpoint_id,
            get_tuple_specific_checkpoint_id, get_tuple_config_structure,
            get_tuple_checkpoint_fields, get_tuple_metadata, get_tuple_parent_config,
            get_tuple_pending_writes, get_tuple_respects_namespace,
            get_tuple_nonexistent_checkpoint_id,
            // list
            list_all, list_by_thread, list_by_namespace, list_ordering,
            list_metadata_filter_single_key, list_metadata_filter_step,
            list_metadata_filter_multiple_keys, list_metadata_filter_no_match,
            list_metadata_custom_keys, list_before, list_limit, list_limit_plus_before,
            list_combined_thread_and_filter, list_empty_result, list_includes_pending_writes,
            list_multiple_namespaces,
            // delete_thread
            delete_thread_removes_checkpoints, delete_thread_removes_writes,
            delete_thread_removes_all_namespaces, delete_thread_preserves_other_threads,
            delete_thread_nonexistent_noop,
            // delete_for_runs (extended)
            delete_for_runs_single, delete_for_runs_multiple, delete_for_runs_preserves_other_runs,
            delete_for_runs_removes_writes, delete_for_runs_empty_list_noop,
            delete_for_runs_nonexistent_noop, delete_for_runs_across_namespaces,
            // copy_thread (extended)
            copy_thread_basic, copy_thread_all_checkpoints, copy_thread_preserves_metadata,
            copy_thread_preserves_namespaces, copy_thread_preserves_writes,
            copy_thread_preserves_ordering, copy_thread_source_unchanged,
            copy_thread_nonexistent_source,
            // prune (extended)
            prune_keep_latest_single_thread, prune_keep_latest_multiple_threads,
            prune_keep_latest_across_namespaces, prune_keep_latest_preserves_writes,
            prune_delete_all, prune_preserves_other_threads, prune_empty_list_noop,
            prune_nonexistent_noop, prune_keep_last, prune_older_than, prune_abandoned_branches,
            prune_idle_threads,
            // get_delta_channel_history (extended)
            delta_history_writes_oldest_first, delta_history_seed_is_nearest_snapshot,
            delta_history_excludes_target_writes, delta_history_multi_channel,
            delta_history_no_channels_is_empty, delta_history_walk_to_root_has_no_seed,
            delta_history_plain_value_is_a_seed, delta_history_seed_checkpoint_writes_are_replayed,
            delta_history_orders_writes_by_task_path, delta_history_orders_pathless_writes_first,
            delta_history_follows_the_parent_chain,
            // stategraph contracts
            put_requires_thread_id, put_writes_requires_checkpoint_id,
            put_writes_special_upsert_and_mixed_ignore, pending_writes_sorted_by_task_path,
            put_preserves_rich_values, put_preserves_checkpoint_fields,
            copy_thread_onto_existing_thread_conflicts, prune_unlinks_deleted_parents,
            get_next_version_increases, list_filter_on_nested_value,
            put_if_latest_on_an_empty_namespace, put_if_latest_chains_and_refuses_a_stale_parent,
            concurrent_put_if_latest_has_one_winner, list_metadata_filter_numbers_by_value,
            list_naming_a_nul_character_answers, list_of_repeating_values_equals_each_read_alone,
            list_without_values_keeps_everything_else, list_pending_writes_are_each_checkpoints_own;
            // stored data damaged behind the saver's back (cases take the whole fixture)
            delta_history_stops_at_a_parent_loop, prune_refuses_unreadable_metadata,
            prune_keeps_values_of_unreadable_checkpoints, damaged_rows_read_as_typed_errors,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    ($factory:path; $($case:ident),* ; $($fixture_case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let fixture: $crate::Fixture = $factory().await;
                $crate::$case(fixture.saver()).await;
            }
        )*
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $fixture_case() {
                let fixture: $crate::Fixture = $factory().await;
                $crate::$fixture_case(fixture).await;
            }
        )*
    };
}

/// A thread id no other case uses.
pub fn thread() -> String {
    format!("thread-{}", uuid6(None))
}

/// A run id no other case uses.
pub fn run_id() -> String {
    format!("run-{}", uuid6(None))
}

/// The root-namespace config of `thread`.
pub fn config(thread: &str) -> CheckpointConfig {
    CheckpointConfig::new(thread)
}

/// LangGraph's `generate_checkpoint`: format version 1, a fresh id, integer versions.
pub fn checkpoint(values: &[(&str, Value)], versions: &[(&str, i64)]) -> Checkpoint {
    Checkpoint {
        v: 1,
        id: uuid6(Some(-1)).into(),
        ts: now_iso(),
        channel_values: values
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        channel_versions: versions_of(versions),
        versions_seen: Default::default(),
        updated_channels: None,
        pending_sends: Some(Vec::new()),
        extra: Vec::new(),
    }
}

/// A version map from integer versions.
pub fn versions_of(versions: &[(&str, i64)]) -> ChannelVersions {
    versions
        .iter()
        .map(|(k, v)| ((*k).to_owned(), ChannelVersion::Int(*v)))
        .collect()
}

/// LangGraph's `generate_metadata`: `source`, `step`, `parents: {}`.
pub fn metadata(source: CheckpointSource, step: i64) -> CheckpointMetadata {
    CheckpointMetadata::new(source, step)
}

/// Puts `cp` with every channel in `new_versions` (the usual case).
pub async fn put(
    saver: &dyn CheckpointSaver,
    config: &CheckpointConfig,
    cp: &Checkpoint,
    meta: &CheckpointMetadata,
) -> CheckpointConfig {
    saver
        .put(config, cp, meta, &cp.channel_versions)
        .await
        .expect("put")
}

/// Puts `n` checkpoints chained by parent in `thread`/`ns`, with `{"step": i}` values and
/// `loop` metadata at steps `0..n`; returns their configs, oldest first.
pub async fn chain(
    saver: &dyn CheckpointSaver,
    thread: &str,
    ns: &str,
    n: usize,
) -> Vec<CheckpointConfig> {
    let mut out: Vec<CheckpointConfig> = Vec::new();
    for i in 0..n {
        let step = i64::try_from(i).unwrap();
        let cp = checkpoint(&[("step", Value::Int(step))], &[("step", step + 1)]);
        let mut parent = config(thread).with_ns(ns);
        if let Some(prev) = out.last() {
            parent.checkpoint_id.clone_from(&prev.checkpoint_id);
        }
        let meta = metadata(CheckpointSource::Loop, step);
        out.push(put(saver, &parent, &cp, &meta).await);
    }
    out
}

/// `get_tuple` that must find something.
pub async fn must_get(saver: &dyn CheckpointSaver, config: &CheckpointConfig) -> CheckpointTuple {
    saver
        .get_tuple(config)
        .await
        .expect("get_tuple")
        .unwrap_or_else(|| panic!("no checkpoint at {config:?}"))
}

/// The checkpoint ids of `tuples`, in order.
pub fn ids(tuples: &[CheckpointTuple]) -> Vec<CheckpointId> {
    tuples.iter().map(|t| t.checkpoint.id.clone()).collect()
}

/// Asserts that an optional operation a saver does not declare fails as `Unsupported`.
pub fn assert_unsupported(result: stategraph_checkpoint::Result<()>, operation: &str) {
    match result {
        Err(stategraph_checkpoint::Error::Unsupported { .. }) => {}
        other => panic!(
            "{operation} is not a declared capability, so it must fail with Error::Unsupported; got {other:?}"
        ),
    }
}

/// Puts an empty `loop` checkpoint at step 0 under `config`; returns its address.
pub async fn empty(saver: &dyn CheckpointSaver, config: &CheckpointConfig) -> CheckpointConfig {
    put(
        saver,
        config,
        &checkpoint(&[], &[]),
        &metadata(CheckpointSource::Loop, 0),
    )
    .await
}

/// Stores one write of `task1` against the checkpoint `at` addresses.
pub async fn write(
    saver: &dyn CheckpointSaver,
    at: &CheckpointConfig,
    channel: &str,
    value: impl Into<Value>,
) {
    saver
        .put_writes(at, &[(channel.to_owned(), value.into())], "task1", "")
        .await
        .expect("put_writes");
}
