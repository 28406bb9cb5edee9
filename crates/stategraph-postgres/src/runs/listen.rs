//! The queue's notifications: the channel of a schema, the payloads the queue's statements
//! send (`json_build_object(...)` with ids only), and the [`Listener`] that receives them.

use futures_util::StreamExt;
use serde_json::Value as Json;
use stategraph_checkpoint::{Error, Result};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls};

use stategraph_runs::{CancelAction, Notification, Notifications, RunStatus};

use super::PostgresRunQueue;
use crate::error::{BACKEND, db};

/// How many notifications a listener buffers before it stops reading its connection until
/// the receiver catches up.
const BUFFER: usize = 1024;

/// The `NOTIFY` channel of the queue in `schema`: `stategraph_runs_` and the 64-bit FNV-1a
/// hash of the schema name in hex (channels are identifiers, at most 63 bytes; a hash keeps
/// queues of different schemas apart whatever their names).
pub(super) fn channel_for(schema: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in schema.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("stategraph_runs_{hash:016x}")
}

/// A notification of the queue's statements (`json_build_object(...)` with ids only).
struct Payload;

impl Payload {
    /// A payload the queue's statements send; `None` for anything else.
    fn parse(payload: &str) -> Option<Notification> {
        let json: Json = serde_json::from_str(payload).ok()?;
        let text = |key: &str| json.get(key).and_then(Json::as_str).map(str::to_owned);
        let run_id = text("run_id")?;
        Some(match json.get("kind")?.as_str()? {
            "enqueued" => Notification::Enqueued {
                run_id,
                thread_id: text("thread_id")?,
                // A process of an earlier version sends no `claimable`: wake as it expected.
                claimable: json.get("claimable").map_or(Some(true), Json::as_bool)?,
            },
            "requeued" => Notification::Requeued {
                run_id,
                thread_id: text("thread_id")?,
            },
            "cancel" => Notification::Cancel {
                run_id,
                action: CancelAction::parse(json.get("action")?.as_str()?)?,
                reason: json
                    .get("reason")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            },
            "event" => Notification::Event {
                run_id,
                seq: json.get("seq")?.as_i64()?,
            },
            "finished" => Notification::Finished {
                run_id,
                // A process of an earlier version sends no `thread_id`: the run is still
                // announced.
                thread_id: text("thread_id").unwrap_or_default(),
                status: match json.get("status") {
                    None | Some(Json::Null) => None,
                    Some(s) => Some(RunStatus::parse(s.as_str()?)?),
                },
            },
            _ => return None,
        })
    }
}

/// Receives a queue's notifications on a connection of its own (`LISTEN` on the queue's
/// channel); made by [`PostgresRunQueue::listen`]. Dropping it closes the connection.
///
/// Notifications sent while no listener was connected are lost: after connecting (and after
/// [`recv`](Self::recv) returned `None` and a new listener connected), read the tables for
/// what may have been missed.
#[derive(Debug)]
pub struct Listener {
    receiver: mpsc::Receiver<Notification>,
    channel: String,
    /// Keeps the connection open.
    _client: tokio_postgres::Client,
}

impl Listener {
    /// Connects (within the connect limit), and `LISTEN`s (within the statement limit).
    pub(super) async fn connect(queue: &PostgresRunQueue) -> Result<Self> {
        let pg = queue.pg.clone().ok_or_else(|| {
            Error::invalid(
                "run queue",
                "listening for notifications needs the connection settings of a database made \
                 from a pool: PostgresDatabase::from_pool(pool).listen_with(config)",
            )
        })?;
        let target = queue.target.clone();
        let connect = async move {
            pg.connect(NoTls).await.map_err(|e| {
                Error::backend(
                    BACKEND,
                    format!("cannot connect to PostgreSQL at {target} to listen"),
                    e,
                )
            })
        };
        let (client, mut connection) = queue
            .timeouts
            .connect(BACKEND, &queue.target, connect)
            .await?;
        let (sender, receiver) = mpsc::channel(BUFFER);
        let channel = queue.channel.clone();
        let wanted = channel.clone();
        // Drives the connection (the LISTEN below needs it too) and forwards notifications,
        // until the connection closes or the listener is dropped.
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(|cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                let AsyncMessage::Notification(n) = message else {
                    continue;
                };
                if n.channel() != wanted {
                    continue;
                }
                if let Some(n) = Payload::parse(n.payload())
                    && sender.send(n).await.is_err()
                {
                    break;
                }
            }
        });
        let listen = async {
            client
                .batch_execute(&format!("LISTEN \"{channel}\""))
                .await
                .map_err(db("listening for run notifications"))
        };
        queue
            .timeouts
            .statement(BACKEND, "listening for run notifications", listen)
            .await?;
        Ok(Self {
            receiver,
            channel,
            _client: client,
        })
    }

    /// The next notification; `None` once the connection is lost (connect a new listener,
    /// then read the tables for what was missed).
    pub async fn recv(&mut self) -> Option<Notification> {
        self.receiver.recv().await
    }

    /// The receiving end, for `select!` loops and the like.
    pub fn receiver(&mut self) -> &mut mpsc::Receiver<Notification> {
        &mut self.receiver
    }

    /// The channel it listens on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The same notifications as a [`Notifications`] subscription (what
    /// [`RunQueue::subscribe`](stategraph_runs::RunQueue::subscribe) answers).
    pub fn into_notifications(self) -> Notifications {
        Notifications::new(self.receiver, self._client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels() {
        let a = channel_for("a");
        assert_eq!(a.len(), "stategraph_runs_".len() + 16);
        assert_ne!(a, channel_for("b"));
        assert_eq!(a, channel_for("a"));
    }

    #[test]
    fn payloads() {
        assert_eq!(
            Payload::parse(r#"{"kind":"event","run_id":"r","seq":3}"#),
            Some(Notification::Event {
                run_id: "r".into(),
                seq: 3
            })
        );
        assert_eq!(
            Payload::parse(r#"{"kind":"finished","run_id":"r","thread_id":"t","status":null}"#),
            Some(Notification::Finished {
                run_id: "r".into(),
                thread_id: "t".into(),
                status: None
            })
        );
        assert_eq!(
            Payload::parse(
                r#"{"kind":"finished","run_id":"r","thread_id":"t","status":"interrupted"}"#
            ),
            Some(Notification::Finished {
                run_id: "r".into(),
                thread_id: "t".into(),
                status: Some(RunStatus::Interrupted)
            })
        );
        // From a process of an earlier version, without the thread.
        assert_eq!(
            Payload::parse(r#"{"kind":"finished","run_id":"r","status":"success"}"#),
            Some(Notification::Finished {
                run_id: "r".into(),
                thread_id: String::new(),
                status: Some(RunStatus::Success)
            })
        );
        assert_eq!(
            Payload::parse(r#"{"kind":"finished","run_id":"r","thread_id":"t","status":"x"}"#),
            None
        );
        assert_eq!(
            Payload::parse(r#"{"kind":"requeued","run_id":"r","thread_id":"t"}"#),
            Some(Notification::Requeued {
                run_id: "r".into(),
                thread_id: "t".into()
            })
        );
        assert_eq!(
            Payload::parse(r#"{"kind":"cancel","run_id":"r","action":"rollback","reason":"x"}"#),
            Some(Notification::Cancel {
                run_id: "r".into(),
                action: CancelAction::Rollback,
                reason: "x".into()
            })
        );
        for (payload, claimable) in [
            (
                r#"{"kind":"enqueued","run_id":"r","thread_id":"t","claimable":false}"#,
                false,
            ),
            (
                r#"{"kind":"enqueued","run_id":"r","thread_id":"t","claimable":true}"#,
                true,
            ),
            (r#"{"kind":"enqueued","run_id":"r","thread_id":"t"}"#, true),
        ] {
            assert_eq!(
                Payload::parse(payload),
                Some(Notification::Enqueued {
                    run_id: "r".into(),
                    thread_id: "t".into(),
                    claimable
                })
            );
        }
        assert_eq!(
            Payload::parse(r#"{"kind":"enqueued","run_id":"r","thread_id":"t","claimable":1}"#),
            None
        );
        assert_eq!(Payload::parse("nonsense"), None);
        assert_eq!(Payload::parse(r#"{"kind":"other","run_id":"r"}"#), None);
    }
}
