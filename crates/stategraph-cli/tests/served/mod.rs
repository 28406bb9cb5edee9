//! `stategraph serve` in a child process, for the tests that talk to it over HTTP.

#![allow(clippy::unwrap_used, dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// `stategraph serve` on `db`, its address, and everything it writes to stderr.
pub(crate) struct Served {
    /// The server's process.
    pub(crate) child: Child,
    /// `host:port`.
    pub(crate) addr: String,
    /// Everything it wrote to stderr after its banner, so far.
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl Served {
    /// Starts `stategraph --db DB serve --port 0 ARGS…` and waits for its address.
    pub(crate) fn start(db: &str, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stategraph"))
            .args(["--db", db, "serve", "--port", "0"])
            .args(args)
            .env_remove("STATEGRAPH_DB")
            .env_remove("STATEGRAPH_API_KEY")
            .env("RUST_BACKTRACE", "1")
            // Serve's default, whatever the caller's environment says: tests read its logs.
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(child.stderr.take().unwrap());
        let mut banner = String::new();
        reader.read_line(&mut banner).unwrap();
        let addr = banner
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {banner:?}"))
            .to_owned();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                let mut all = sink.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        Self {
            child,
            addr,
            stderr,
        }
    }
}

impl Served {
    /// Asks the server to stop, as a process manager does (SIGTERM).
    pub(crate) fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM failed: {status:?}");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
