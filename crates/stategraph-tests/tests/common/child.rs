//! Child processes of the process tests: the test binary itself, re-run on one ignored test
//! entry with its role in the environment, the `RESULT …` line it prints, and the journal of
//! side effects every process appends to.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// This test binary, to run its ignored test `entry` alone (a child process's role).
pub(crate) fn entry_command(entry: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args([
        entry,
        "--ignored",
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    command
}

/// Re-runs this test binary on the ignored test `entry` alone, with `env` set, its output
/// piped (for [`result_of`]).
pub(crate) fn spawn_entry(entry: &str, env: &[(&str, &OsStr)]) -> Child {
    entry_command(entry)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// What the child printed after `RESULT ` (it waits for the child to end).
pub(crate) fn result_of(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r.trim()))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            panic!(
                "child printed no result:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Appends `line` to `dir`'s journal (one line per side effect, from any process).
pub(crate) fn journal(dir: &Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("journal"))
        .unwrap();
    writeln!(f, "{line}").unwrap();
}
