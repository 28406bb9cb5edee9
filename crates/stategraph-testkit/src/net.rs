//! A server that accepts connections and never answers, a proxy that can go silent in the
//! middle of a session, and a bound on how long a call that must give up by itself may take.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Runs `work`, failing the test (instead of hanging CI) if it has not ended after 30 s: for
/// calls that must give up by themselves, on their own timeouts.
///
/// # Panics
/// If `work` is still running after 30 seconds.
#[allow(clippy::expect_used)] // test support: a call that never ends fails the test
pub async fn bounded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), work)
        .await
        .expect("the saver's own limit must end the call")
}

/// Accepts every connection on a loopback port and then says nothing, holding the sockets
/// open (what a hung database server looks like to a client). Stops when dropped.
#[derive(Debug)]
pub struct SilentServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl SilentServer {
    /// Starts listening on `127.0.0.1` (a free port).
    ///
    /// # Panics
    /// If no loopback port can be bound.
    #[allow(clippy::expect_used)] // test support: failing to bind fails the test
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        Self { addr, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Forwards loopback connections to `upstream` until told to go silent; from then on it
/// passes nothing in either direction and keeps the sockets open (a server or network that
/// stops answering mid-run). Stops when dropped.
#[derive(Debug)]
pub struct StallingProxy {
    addr: SocketAddr,
    silent: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl StallingProxy {
    /// Starts a proxy to `upstream` on `127.0.0.1` (a free port).
    ///
    /// # Panics
    /// If no loopback port can be bound.
    #[allow(clippy::expect_used)] // test support: failing to bind fails the test
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        let silent = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&silent);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let flag = Arc::clone(&flag);
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        let up = tokio::spawn(pump(cr, sw, Arc::clone(&flag)));
                        let down = tokio::spawn(pump(sr, cw, flag));
                        let _ = tokio::join!(up, down);
                    }
                });
            }
        });
        Self { addr, silent, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on nothing passes (connections stay open).
    pub fn go_silent(&self) {
        self.silent.store(true, Ordering::SeqCst);
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to` while the flag is down; once it is up, holds both ends forever.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    silent: Arc<AtomicBool>,
) {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if silent.load(Ordering::SeqCst) {
            // Swallow this and everything after it, keeping the sockets open.
            std::future::pending::<()>().await;
        }
        let Some(chunk) = buf.get(..n) else { return };
        if to.write_all(chunk).await.is_err() {
            return;
        }
    }
}

/// Mid-run silence: stores an empty checkpoint on `thread` through `saver` (connected via
/// `proxy`), silences the proxy, and reads the checkpoint back, bounded by [`bounded`].
/// Returns the checkpoint's address and the read's outcome, for the test to assert on.
///
/// # Panics
/// If the first save fails (the proxy still forwarded then), or the read does not end.
#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "redis",
    feature = "sqlite",
    feature = "mongodb"
))]
#[allow(clippy::expect_used)] // test support: a failed save fails the test
pub async fn read_after_silence(
    saver: &dyn stategraph_checkpoint::CheckpointSaver,
    proxy: &StallingProxy,
    thread: &str,
) -> (
    stategraph_checkpoint::CheckpointConfig,
    stategraph_checkpoint::Result<Option<stategraph_checkpoint::CheckpointTuple>>,
) {
    use stategraph_checkpoint::{
        Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource,
    };
    let cp = Checkpoint::empty();
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let at = saver
        .put(
            &CheckpointConfig::new(thread),
            &cp,
            &meta,
            &cp.channel_versions,
        )
        .await
        .expect("the save before the silence");
    proxy.go_silent();
    let read = bounded(saver.get_tuple(&at)).await;
    (at, read)
}
