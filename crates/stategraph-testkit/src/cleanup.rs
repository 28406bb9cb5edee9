//! A guard that runs an async clean-up when dropped.

use std::future::Future;
use std::pin::Pin;

/// Runs an async clean-up when dropped — a test's scratch schema, database or key prefix —
/// on a runtime of its own in a thread of its own, so it works from sync and async tests
/// alike (a `Drop` cannot await, and cannot block inside the test's runtime).
///
/// ```
/// let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
/// let flag = std::sync::Arc::clone(&dropped);
/// let guard = stategraph_testkit::Cleanup::new(async move {
///     flag.store(true, std::sync::atomic::Ordering::SeqCst);
/// });
/// drop(guard);
/// assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
/// ```
#[must_use = "the clean-up runs when the guard is dropped"]
pub struct Cleanup(Option<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl Cleanup {
    /// Runs `work` when the guard is dropped.
    pub fn new(work: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(Some(Box::pin(work)))
    }
}

impl std::fmt::Debug for Cleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cleanup")
            .field("pending", &self.0.is_some())
            .finish()
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(work) = self.0.take() else { return };
        let _ = std::thread::spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(work),
                Err(e) => eprintln!("clean-up skipped: no runtime: {e}"),
            }
        })
        .join();
    }
}
