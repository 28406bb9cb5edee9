//! Notifications, without polling, across processes.
//!
//! A handle announces the changes it makes, once committed: to its own subscribers directly,
//! and to every other handle with subscribers (in this process or another) by a Unix
//! datagram. A handle with subscribers binds a datagram socket — on Linux an address in the
//! abstract namespace (nothing on disk; it vanishes with the socket), on other Unix systems a
//! socket file under the temporary directory — and registers its name in
//! `stategraph_run_listeners`; it unregisters when its last subscription is dropped. A change
//! reads the registered names in its own write transaction and, after the commit, sends each
//! of them but its own handle a small JSON datagram per notification (the fields of
//! [`Notification`]); a send that finds nobody bound there removes that registration (its
//! process is gone). On other systems a handle's subscribers hear its own changes only.
//!
//! Notifications are a wake-up, not the truth: a datagram lost (a receiver's buffer full) is
//! tolerated, as readers read the queue again on a timer of their own.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::json;
use stategraph_runs::RunStatus;
use tokio::sync::{OnceCell, mpsc};

use super::*;
use crate::error::{BACKEND, db};

/// How many notifications a subscriber buffers; beyond that it misses the newest.
const BUFFER: usize = 1024;

/// The longest stop reason a datagram carries, in bytes (the heartbeat has all of it).
#[cfg(unix)]
const MAX_REASON: usize = 8 * 1024;

/// The largest datagram read.
#[cfg(unix)]
const MAX_DATAGRAM: usize = 64 * 1024;

/// The subscribers of a handle and its listening socket.
#[derive(Default)]
pub(super) struct Hub {
    state: Mutex<HubState>,
    /// The unbound socket notifications are sent from, made on first use.
    #[cfg(unix)]
    sender: std::sync::OnceLock<Option<std::os::unix::net::UnixDatagram>>,
}

#[derive(Default)]
struct HubState {
    subscribers: Vec<mpsc::Sender<Notification>>,
    /// The listening socket, while a subscription holds it.
    listener: Weak<Listener>,
}

/// A handle's listening socket, registered, shared by its subscriptions: the last one
/// dropped closes it and unregisters it.
struct Listener {
    name: String,
    pool: Arc<Pool>,
    task: tokio::task::JoinHandle<()>,
    registered: OnceCell<()>,
}

fn lock(m: &Mutex<HubState>) -> MutexGuard<'_, HubState> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The names registered in `stategraph_run_listeners`.
pub(super) fn listeners(conn: &Connection) -> Result<Vec<String>> {
    let reading = db("reading the notification listeners");
    let mut stmt = conn
        .prepare_cached("SELECT name FROM stategraph_run_listeners")
        .map_err(&reading)?;
    let rows = stmt.query_map([], |r| r.get(0)).map_err(&reading)?;
    rows.collect::<rusqlite::Result<_>>().map_err(reading)
}

/// Removes the registrations of `names`.
fn unregister(pool: &Pool, names: &[String]) -> Result<()> {
    let names = Json::from(names.to_vec()).to_string();
    pool.write(|conn| {
        conn.prepare_cached(
            "DELETE FROM stategraph_run_listeners WHERE name IN (SELECT value FROM json_each(?1))",
        )
        .and_then(|mut s| s.execute([&names]))
        .map(drop)
        .map_err(db("unregistering a notification listener"))
    })
}

/// A subscription to `shared`'s handle: its own changes, and (with a file, on Unix) those of
/// every other handle on the file.
pub(super) async fn subscribe(shared: &Arc<Shared>) -> Result<Notifications> {
    let (sender, receiver) = mpsc::channel(BUFFER);
    let listener = {
        let mut state = lock(&shared.hub.state);
        state.subscribers.push(sender);
        match state.listener.upgrade() {
            Some(listener) => Some(listener),
            None if shared.pool.config().path().is_some() => {
                let listener = Listener::start(shared)?;
                if let Some(l) = &listener {
                    state.listener = Arc::downgrade(l);
                }
                listener
            }
            None => None,
        }
    };
    if let Some(l) = &listener {
        l.registered
            .get_or_try_init(|| async {
                let (pool, name) = (Arc::clone(&l.pool), l.name.clone());
                tokio::task::spawn_blocking(move || {
                    pool.write(|conn| {
                        conn.prepare_cached(
                            "INSERT OR REPLACE INTO stategraph_run_listeners \
                             (name, pid, registered_at) VALUES (?1, ?2, ?3)",
                        )
                        .and_then(|mut s| {
                            s.execute(rusqlite::params![
                                name,
                                std::process::id(),
                                micros(SystemTime::now())
                            ])
                        })
                        .map(drop)
                        .map_err(db("registering a notification listener"))
                    })
                })
                .await
                .map_err(join)?
            })
            .await?;
    }
    Ok(Notifications::new(receiver, listener))
}

impl Hub {
    /// Announces `notes`, committed: to this handle's subscribers, and to `listeners` (the
    /// names registered when they were made) but this handle's own.
    pub(super) fn announce(&self, pool: &Pool, notes: &[Notification], listeners: &[String]) {
        if notes.is_empty() {
            return;
        }
        self.deliver(notes);
        #[cfg(unix)]
        self.send(pool, notes, listeners);
        #[cfg(not(unix))]
        let _ = (pool, listeners);
    }

    /// Hands `notes` to this handle's subscribers.
    fn deliver(&self, notes: &[Notification]) {
        let mut state = lock(&self.state);
        state.subscribers.retain(|s| !s.is_closed());
        for note in notes {
            for s in &state.subscribers {
                let _ = s.try_send(note.clone());
            }
        }
    }

    /// Ends every subscription (its socket failed): they read `None`, and subscribe again.
    #[cfg(unix)]
    fn lose(&self) {
        let mut state = lock(&self.state);
        state.subscribers.clear();
        state.listener = Weak::new();
    }

    /// Sends `notes` to `listeners` but this handle's own; removes the registrations of
    /// those nobody listens at any more.
    #[cfg(unix)]
    fn send(&self, pool: &Pool, notes: &[Notification], listeners: &[String]) {
        let own = lock(&self.state).listener.clone();
        let own = own.upgrade();
        let others: Vec<&String> = listeners
            .iter()
            .filter(|n| own.as_ref().is_none_or(|l| l.name != **n))
            .collect();
        if others.is_empty() {
            return;
        }
        let Some(sender) = self.sender.get_or_init(socket::unbound) else {
            return;
        };
        let payloads: Vec<Vec<u8>> = notes.iter().map(encode).collect();
        let mut gone = Vec::new();
        for name in others {
            for payload in &payloads {
                match socket::send(sender, name, payload) {
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
                        ) =>
                    {
                        gone.push(name.clone());
                        break;
                    }
                    // Delivered, or lost (a full buffer): a wake-up may be lost.
                    _ => {}
                }
            }
        }
        if !gone.is_empty() {
            let _ = unregister(pool, &gone);
        }
    }
}

impl Listener {
    /// Binds a new socket and listens on it for `shared`'s subscribers (not registered yet);
    /// `None` where processes cannot be notified.
    #[cfg(unix)]
    fn start(shared: &Arc<Shared>) -> Result<Option<Arc<Self>>> {
        let name = socket::name();
        let bound = socket::bind(&name)
            .and_then(|s| s.set_nonblocking(true).map(|()| s))
            .and_then(tokio::net::UnixDatagram::from_std)
            .map_err(|e| Error::backend(BACKEND, "binding the notification socket", e))?;
        let task = tokio::spawn(listen(bound, Arc::downgrade(shared)));
        Ok(Some(Arc::new(Self {
            name,
            pool: Arc::clone(&shared.pool),
            task,
            registered: OnceCell::new(),
        })))
    }

    #[cfg(not(unix))]
    fn start(_: &Arc<Shared>) -> Result<Option<Arc<Self>>> {
        Ok(None)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
        #[cfg(unix)]
        socket::remove(&self.name);
        let (pool, names) = (Arc::clone(&self.pool), vec![std::mem::take(&mut self.name)]);
        let unregister = move || drop(unregister(&pool, &names));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(unregister)),
            Err(_) => unregister(),
        }
    }
}

/// Receives the datagrams of `socket` for the subscribers of `shared`'s handle while it
/// lives.
#[cfg(unix)]
async fn listen(socket: tokio::net::UnixDatagram, shared: Weak<Shared>) {
    let mut buf = vec![0; MAX_DATAGRAM];
    loop {
        let received = socket.recv(&mut buf).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        match received {
            Ok(n) => {
                if let Some(note) = buf.get(..n).and_then(decode) {
                    shared.hub.deliver(&[note]);
                }
            }
            Err(_) => return shared.hub.lose(),
        }
    }
}

/// A notification as a datagram: a JSON object with its kind and fields.
#[cfg(unix)]
fn encode(note: &Notification) -> Vec<u8> {
    let value = match note {
        Notification::Enqueued {
            run_id,
            thread_id,
            claimable,
        } => {
            json!({ "kind": "enqueued", "run_id": run_id, "thread_id": thread_id, "claimable": claimable })
        }
        Notification::Requeued { run_id, thread_id } => {
            json!({ "kind": "requeued", "run_id": run_id, "thread_id": thread_id })
        }
        Notification::Cancel {
            run_id,
            action,
            reason,
        } => {
            let mut end = reason.len().min(MAX_REASON);
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            let reason = reason.get(..end).unwrap_or_default();
            json!({ "kind": "cancel", "run_id": run_id, "action": action.as_str(), "reason": reason })
        }
        Notification::Event { run_id, seq } => {
            json!({ "kind": "event", "run_id": run_id, "seq": seq })
        }
        Notification::Finished {
            run_id,
            thread_id,
            status,
        } => json!({
            "kind": "finished", "run_id": run_id, "thread_id": thread_id,
            "status": status.map(RunStatus::as_str),
        }),
        _ => Json::Null,
    };
    value.to_string().into_bytes()
}

/// The notification of a datagram, if it is one.
#[cfg(unix)]
fn decode(bytes: &[u8]) -> Option<Notification> {
    let v: Json = serde_json::from_slice(bytes).ok()?;
    let text = |key: &str| v.get(key)?.as_str().map(str::to_owned);
    let run_id = text("run_id")?;
    Some(match v.get("kind")?.as_str()? {
        "enqueued" => Notification::Enqueued {
            run_id,
            thread_id: text("thread_id")?,
            claimable: v.get("claimable")?.as_bool()?,
        },
        "requeued" => Notification::Requeued {
            run_id,
            thread_id: text("thread_id")?,
        },
        "cancel" => Notification::Cancel {
            run_id,
            action: CancelAction::parse(v.get("action")?.as_str()?)?,
            reason: text("reason")?,
        },
        "event" => Notification::Event {
            run_id,
            seq: v.get("seq")?.as_i64()?,
        },
        "finished" => Notification::Finished {
            run_id,
            thread_id: text("thread_id")?,
            status: match v.get("status")? {
                Json::Null => None,
                status => Some(RunStatus::parse(status.as_str()?)?),
            },
        },
        _ => return None,
    })
}

/// The sockets: names, binding, sending.
#[cfg(unix)]
mod socket {
    use std::hash::{BuildHasher, RandomState};
    use std::io;
    use std::os::unix::net::UnixDatagram;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A name no other socket has: the process, a counter, and a random number.
    pub(super) fn name() -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let random = RandomState::new().hash_one(n);
        let name = format!("stategraph-runs-{}-{n}-{random:016x}", std::process::id());
        if cfg!(target_os = "linux") {
            name
        } else {
            std::env::temp_dir()
                .join(format!("{name}.sock"))
                .to_string_lossy()
                .into_owned()
        }
    }

    /// The socket notifications are sent from, if one can be made.
    pub(super) fn unbound() -> Option<UnixDatagram> {
        let socket = UnixDatagram::unbound().ok()?;
        socket.set_nonblocking(true).ok()?;
        Some(socket)
    }

    #[cfg(target_os = "linux")]
    fn address(name: &str) -> io::Result<std::os::unix::net::SocketAddr> {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
    }

    /// A socket bound to `name`.
    pub(super) fn bind(name: &str) -> io::Result<UnixDatagram> {
        #[cfg(target_os = "linux")]
        return UnixDatagram::bind_addr(&address(name)?);
        #[cfg(not(target_os = "linux"))]
        return UnixDatagram::bind(name);
    }

    /// Sends `payload` to the socket named `name`.
    pub(super) fn send(socket: &UnixDatagram, name: &str, payload: &[u8]) -> io::Result<usize> {
        #[cfg(target_os = "linux")]
        return socket.send_to_addr(payload, &address(name)?);
        #[cfg(not(target_os = "linux"))]
        return socket.send_to(payload, name);
    }

    /// Removes what a closed socket left (its file, outside Linux).
    pub(super) fn remove(name: &str) {
        if !cfg!(target_os = "linux") {
            let _ = std::fs::remove_file(name);
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Every notification crosses as a datagram and comes back the same; a long stop reason
    /// is cut at a character boundary; what is not a notification is dropped.
    #[test]
    fn notifications_round_trip_as_datagrams() {
        let notes = [
            Notification::Enqueued {
                run_id: "r\u{0}ü".into(),
                thread_id: "t".into(),
                claimable: true,
            },
            Notification::Requeued {
                run_id: "r".into(),
                thread_id: "t".into(),
            },
            Notification::Cancel {
                run_id: "r".into(),
                action: CancelAction::Rollback,
                reason: "stop €".into(),
            },
            Notification::Event {
                run_id: "r".into(),
                seq: 7,
            },
            Notification::Finished {
                run_id: "r".into(),
                thread_id: "t".into(),
                status: Some(RunStatus::Error),
            },
            Notification::Finished {
                run_id: "r".into(),
                thread_id: "t".into(),
                status: None,
            },
        ];
        for note in notes {
            assert_eq!(decode(&encode(&note)), Some(note));
        }
        let long = Notification::Cancel {
            run_id: "r".into(),
            action: CancelAction::Interrupt,
            reason: "€".repeat(MAX_REASON),
        };
        let Some(Notification::Cancel { reason, .. }) = decode(&encode(&long)) else {
            panic!("a cancel");
        };
        assert!(reason.len() <= MAX_REASON && reason.chars().all(|c| c == '€'));
        for junk in [
            &b"not json"[..],
            br#"{"kind":"later","run_id":"r"}"#,
            br#"{"kind":"event"}"#,
        ] {
            assert_eq!(decode(junk), None);
        }
    }
}
