//! Server processes for the tests and benchmarks that run several: serving on a free port
//! announced through a file, waiting for that file, and killing the child on drop.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stategraph::server::Server;

#[path = "child.rs"]
#[allow(dead_code, reason = "only its command is used here")]
mod child;

/// Kills the child on drop, so a failure leaves no server behind.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Serves `server` on a free loopback port, written to `port_file` (atomically) once bound.
pub(crate) async fn serve_announced(server: Server, port_file: &Path) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let tmp = port_file.with_extension("tmp");
    std::fs::write(&tmp, port.to_string()).unwrap();
    std::fs::rename(tmp, port_file).unwrap();
    server.serve(listener).await.unwrap();
}

/// Spawns `command` (its output discarded) and waits up to a minute for the port it
/// announces in `port_file`.
pub(crate) fn spawn_announced(mut command: Command, port_file: &Path) -> (Killed, u16) {
    let _ = std::fs::remove_file(port_file);
    let child = Killed(
        command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(p) = std::fs::read_to_string(port_file) {
            return (child, p.trim().parse().unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "the server process did not start ({})",
            port_file.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Re-runs this test binary on its ignored test `entry` (a server process of the calling
/// test) with `env`, and waits for the port it announces in `port_file`.
#[allow(
    dead_code,
    reason = "the scale-out bench starts its servers through an env variable"
)]
pub(crate) fn spawn_entry(entry: &str, env: &[(&str, &str)], port_file: &Path) -> (Killed, u16) {
    let mut command = child::entry_command(entry);
    for (k, v) in env {
        command.env(k, v);
    }
    spawn_announced(command, port_file)
}
