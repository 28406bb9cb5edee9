//! One connection pool per database and connection settings, shared by the savers, stores
//! and run queues a process opens with them: a deployment that keeps checkpoints, records and
//! its queue in one database holds one set of connections, not three.
//!
//! A connection is handed out without a health query (that would cost a round trip, and a
//! transaction of the server, per operation): one the server ended (restart, failover,
//! `pg_terminate_backend`) is seen as closed by the driver and replaced, and each user sends
//! again what it can safely repeat. A connection idle for longer than the idle timeout is
//! replaced instead of reused.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use deadpool_postgres::{
    BuildError, Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, WeakPool,
};
use tokio_postgres::NoTls;

/// The pools of this process, by connection settings, size and idle timeout; a pool stays as
/// long as one of its users does.
type Registry = HashMap<String, WeakPool>;

fn registry() -> &'static Mutex<Registry> {
    static POOLS: OnceLock<Mutex<Registry>> = OnceLock::new();
    POOLS.get_or_init(Mutex::default)
}

/// The pool for `pg` with at most `size` connections, shared with every other user of the
/// process that asked for the same settings.
pub(crate) fn shared(
    pg: &tokio_postgres::Config,
    size: usize,
    idle: Option<Duration>,
) -> Result<Pool, BuildError> {
    let key = format!("{pg:?}|{size}|{idle:?}");
    let mut pools = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pool) = pools.get(&key).and_then(|w| w.upgrade()) {
        return Ok(pool);
    }
    pools.retain(|_, w| w.upgrade().is_some());
    let manager = Manager::from_config(
        pg.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(size)
        .pre_recycle(Hook::sync_fn(move |_, metrics| match idle {
            Some(limit) if metrics.last_used() > limit => {
                Err(HookError::Message("idle for too long".into()))
            }
            _ => Ok(()),
        }))
        .build()?;
    pools.insert(key, pool.weak());
    Ok(pool)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn one_pool_per_settings() {
        let pg: tokio_postgres::Config = "postgres://u@h:5/db".parse().unwrap();
        let a = shared(&pg, 4, None).unwrap();
        let b = shared(&pg, 4, None).unwrap();
        // The same pool: resizing one resizes the other.
        a.resize(3);
        assert_eq!(b.status().max_size, 3);
        let other = shared(&pg, 2, None).unwrap();
        assert_eq!(other.status().max_size, 2, "another size is another pool");
        let elsewhere: tokio_postgres::Config = "postgres://u@h:5/other".parse().unwrap();
        assert_eq!(shared(&elsewhere, 4, None).unwrap().status().max_size, 4);
        // Gone with its last user.
        drop((a, b));
        assert_eq!(shared(&pg, 4, None).unwrap().status().max_size, 4);
    }
}
