//! Running the pinned Python LangGraph environment that interop tests drive
//! (`scripts/python-env.sh` installs it). Everything here panics, with Python's stderr, when
//! Python fails or is missing: an interop test fails instead of silently skipping.

#![allow(
    clippy::expect_used,
    reason = "test support: a Python that cannot be run fails the test"
)]

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Python interpreter of the pinned LangGraph environment: `$STATEGRAPH_PYTHON`, else
/// `~/.cache/stategraph/py-venv/bin/python` (where `scripts/python-env.sh` puts it).
///
/// # Panics
/// Naming the set-up command, when it is missing.
pub fn python_interpreter() -> PathBuf {
    let candidate = std::env::var_os("STATEGRAPH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/stategraph/py-venv/bin/python")
        });
    assert!(
        candidate.exists(),
        "Python LangGraph is not installed at {}: run `scripts/python-env.sh` (scripts/test.sh \
         does) or set STATEGRAPH_PYTHON",
        candidate.display()
    );
    candidate
}

/// The repository's root directory (where `scripts/` is).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the pinned Python ([`python_interpreter`]) with `args`, `input` on its stdin, and
/// parses its stdout as JSON.
///
/// # Panics
/// With Python's stderr when it fails, or its stdout when that is not JSON.
pub fn run_python_json<I, S>(args: I, input: &str) -> serde_json::Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().into()).collect();
    let mut child = Command::new(python_interpreter())
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting Python");
    child
        .stdin
        .take()
        .expect("Python's stdin")
        .write_all(input.as_bytes())
        .expect("writing to Python");
    let out = child.wait_with_output().expect("waiting for Python");
    assert!(
        out.status.success(),
        "python {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "python {args:?} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Runs `scripts/interop/{script}` with the pinned interpreter on `db`, `thread` and the
/// actions, and parses what it prints as JSON; panics with its stderr when it fails.
pub fn interop_script(script: &str, db: &str, thread: &str, actions: &[&str]) -> serde_json::Value {
    let out = Command::new(python_interpreter())
        .arg(repo_root().join("scripts/interop").join(script))
        .arg(db)
        .arg(thread)
        .args(actions)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Runs the project's `scripts/interop/seed_graph.py DB GRAPH THREAD ACTIONS…` with the
/// pinned Python LangGraph (its saver encrypting under `aes_key` when given, as
/// `LANGGRAPH_AES_KEY`), and returns the JSON it prints.
///
/// # Panics
/// With Python's stderr when the script fails.
pub fn seed_graph_py(
    aes_key: Option<&str>,
    db: &(impl AsRef<OsStr> + ?Sized),
    graph: &str,
    thread: &str,
    actions: &[&str],
) -> serde_json::Value {
    let script = repo_root().join("scripts/interop/seed_graph.py");
    let mut cmd = Command::new(python_interpreter());
    match aes_key {
        Some(key) => cmd.env("LANGGRAPH_AES_KEY", key),
        None => cmd.env_remove("LANGGRAPH_AES_KEY"),
    };
    let out = cmd
        .arg(script)
        .arg(db)
        .arg(graph)
        .arg(thread)
        .args(actions)
        .output()
        .unwrap_or_else(|e| panic!("cannot run seed_graph.py: {e}"));
    assert!(
        out.status.success(),
        "seed_graph.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("seed_graph.py printed no JSON: {e}"))
}
