//! The shared conformance suite of [`Store`] backends: one `pub async fn` per behaviour,
//! run by every backend with [`store_conformance!`](crate::store_conformance).
//!
//! ```text
//! async fn make(options: StoreOptions) -> StoreFixture {
//!     let mut config = MyStoreConfig::from_url(URL).unwrap().ttl(options.ttl);
//!     if let Some(index) = options.index {
//!         config = config.index(index);
//!     }
//!     StoreFixture::new(config.connect().await.unwrap())
//! }
//! stategraph_conformance::store_conformance!(make);
//! ```
//!
//! Each case asks for a fresh store with the options it needs (an index, a TTL config) and
//! works under its own root label, so cases may share one database.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use stategraph_checkpoint::uuid6;
use stategraph_store::*;

mod basics;
mod batch;
mod namespaces;
mod search;
mod semantic;
mod ttl;

pub use basics::*;
pub use batch::*;
pub use namespaces::*;
pub use search::*;
pub use semantic::*;
pub use ttl::*;

/// What a case needs of its store (the same options users open stores with).
pub use stategraph_store::StoreOptions;

/// A store under test, plus anything that must live as long as it.
pub struct StoreFixture {
    store: Arc<dyn Store>,
    _guard: Option<Box<dyn std::any::Any + Send>>,
}

impl StoreFixture {
    /// A fixture around `store`.
    pub fn new(store: impl Store + 'static) -> Self {
        Self {
            store: Arc::new(store),
            _guard: None,
        }
    }

    /// Keeps `guard` alive until the fixture is dropped.
    pub fn with_guard(mut self, guard: impl std::any::Any + Send) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}

/// How cases get stores: the backend's factory, boxed.
pub type MakeStore<'a> =
    &'a (dyn Fn(StoreOptions) -> Pin<Box<dyn Future<Output = StoreFixture> + Send>> + Sync);

/// Expands to one `#[tokio::test]` per store conformance case, each calling
/// `$factory(options).await` for a fresh [`StoreFixture`].
#[macro_export]
macro_rules! store_conformance {
    ($factory:path) => {
        $crate::__store_conformance_cases!($factory;
            put_get_roundtrip, get_missing_is_none, item_fields, put_updates_in_place,
            delete_removes, delete_missing_is_noop, namespaces_isolate_keys,
            rejects_bad_namespaces, rejects_non_object_values, batch_results_in_order,
            batch_last_put_wins, search_prefix_is_label_wise, search_orders_newest_first,
            search_limit_offset, search_filter_equality, search_filter_numeric,
            search_filter_strings, search_filter_ne_and_missing, search_filter_containment,
            search_filter_rejects_bad_operators, semantic_search_ranks_by_meaning,
            semantic_search_respects_prefix_and_filter, semantic_search_scores_descending,
            semantic_search_without_index_ignores_query, index_false_is_not_embedded,
            index_fields_override, index_array_paths_embed_each_element,
            reembeds_only_changed_text, reindex_after_text_change, delete_removes_vectors,
            list_namespaces_sorted, list_namespaces_max_depth, list_namespaces_suffix_and_wildcard,
            list_namespaces_limit_offset, ttl_expires_items, ttl_refresh_on_read,
            ttl_sweep_deletes_expired, ttl_default_from_config, clock_stamps_items,
            unicode_and_nested_values, extreme_numbers_read_back,
            nul_characters_read_back_or_are_refused,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_cases {
    ($factory:path; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let make = |o: $crate::store::StoreOptions|
                    -> ::std::pin::Pin<Box<dyn ::std::future::Future<
                        Output = $crate::store::StoreFixture> + Send>> {
                    Box::pin($factory(o))
                };
                $crate::store::$case(&make).await;
            }
        )*
    };
}

/// A root label no other case uses.
pub fn root() -> String {
    format!("t{}", uuid6(None).replace('-', ""))
}

/// An embedding that counts the texts it embeds (a real [`HashingEmbeddings`] underneath).
#[derive(Debug)]
pub struct CountingEmbeddings {
    inner: HashingEmbeddings,
    /// Texts embedded so far (documents only).
    pub documents: AtomicUsize,
}

#[async_trait]
impl Embeddings for CountingEmbeddings {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.documents.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed_documents(texts).await
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        Ok(self.inner.embed(text))
    }
    fn dims(&self) -> Option<usize> {
        Some(DIMS)
    }
}

/// The dimensions of the suite's index.
pub const DIMS: usize = 64;

pub(super) fn counting() -> Arc<CountingEmbeddings> {
    Arc::new(CountingEmbeddings {
        inner: HashingEmbeddings::new(DIMS),
        documents: AtomicUsize::new(0),
    })
}

pub(super) fn indexed(embed: Arc<CountingEmbeddings>, fields: &[&str]) -> StoreOptions {
    StoreOptions {
        index: Some(IndexConfig::new(DIMS, embed).with_fields(fields.iter().copied())),
        ttl: TtlConfig::default(),
    }
}

pub(super) async fn plain(make: MakeStore<'_>) -> StoreFixture {
    make(StoreOptions::default()).await
}

/// The time the suite's manual clocks start at: long past, so that a store comparing expiry
/// with the database server's clock instead of its own sees every item as expired.
pub fn manual_start() -> Timestamp {
    Timestamp::parse("2001-02-03T04:05:06.789Z").expect("a valid timestamp")
}

/// A store without index whose clock is the returned manual clock (starting at
/// [`manual_start`]).
pub(super) async fn clocked(make: MakeStore<'_>) -> (StoreFixture, ManualClock) {
    let clock = ManualClock::new(manual_start());
    let ttl = TtlConfig::default().with_clock(clock.clock());
    (make(StoreOptions::new().ttl(ttl)).await, clock)
}

pub(super) fn keys(items: &[SearchItem]) -> Vec<&str> {
    items.iter().map(|i| i.key.as_str()).collect()
}

pub(super) async fn search(s: &dyn Store, prefix: &[&str], o: SearchOptions) -> Vec<SearchItem> {
    s.search(prefix, o).await.expect("search")
}
