//! The reference Agent Server (`langgraph dev`, pinned; installed by
//! `scripts/reference-server.sh install`, which `scripts/test.sh` runs) started for a test
//! that compares stategraph's answers with it.

use std::process::{Command, Stdio};

use serde_json::Value as Json;

/// Starts the reference server on a free port with `env`; stopped on drop.
pub(crate) struct Reference {
    pid: String,
    /// The port it listens on (loopback).
    pub(crate) port: u16,
}

impl Reference {
    /// Starts it on a free loopback port with the environment `env` added; waits until it
    /// answers.
    pub(crate) fn start(env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = stategraph_testkit::python::repo_root().join("scripts/reference-server.sh");
        let mut command = Command::new(&script);
        command
            .args(["start", &port.to_string()])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "the reference server did not start (install it with `scripts/reference-server.sh \
             install`; scripts/test.sh does)"
        );
        let pid = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Self { pid, port }
    }

    /// Its base URL.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let script = stategraph_testkit::python::repo_root().join("scripts/reference-server.sh");
        let _ = Command::new(script)
            .args(["stop", &self.pid])
            .stderr(Stdio::null())
            .status();
    }
}

/// Where two transcripts (objects of the same keys) differ, key by key, leaving out the keys
/// of `deliberate` (each with why it differs): empty when they agree.
pub(crate) fn transcript_diffs(
    ours: &Json,
    theirs: &Json,
    deliberate: &[(&str, &str)],
) -> Vec<String> {
    let (Json::Object(ours), Json::Object(theirs)) = (ours, theirs) else {
        panic!("transcripts are objects: {ours} / {theirs}");
    };
    let keys: std::collections::BTreeSet<&String> = theirs.keys().chain(ours.keys()).collect();
    keys.into_iter()
        .filter(|key| !deliberate.iter().any(|(k, _)| k == key))
        .filter_map(|key| {
            let (r, o) = (theirs.get(key), ours.get(key));
            (r != o).then(|| {
                format!(
                    "{key}:\n  reference {}\n  ours      {}",
                    r.map_or("(none)".into(), Json::to_string),
                    o.map_or("(none)".into(), Json::to_string)
                )
            })
        })
        .collect()
}
