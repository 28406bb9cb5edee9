//! The integration tests and benches of the `stategraph` facade (not published).
//!
//! They live in this package of their own, not in the facade, so that the facade's examples
//! (`cargo run -p stategraph --example seed_tour`, the README's quick start) compile only what
//! they run: a package's examples are built with all of its dev-dependencies, and these tests
//! need the test kit with every backend driver, the MongoDB driver and criterion.
//!
//! Run them with `cargo test -p stategraph-tests` (add `--all-features` for the Agent Server,
//! agent and backend tests), or with the whole suite, `scripts/test.sh`. The library itself
//! only re-exports the facade, so a test can name it either way:
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let saver = stategraph_tests::stategraph::open_saver("memory:").await?;
//! assert_eq!(saver.name(), "memory");
//! # Ok::<(), stategraph_tests::stategraph::Error>(())
//! # }).unwrap();
//! ```

pub use stategraph;
