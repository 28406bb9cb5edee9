//! A durable workflow with the Functional API: an entrypoint starts ten tasks in parallel,
//! the process running it is killed midway, and a new process resumes the workflow: the
//! tasks whose results were saved are not run again. Then an approval step waits for a human
//! with `interrupt()`, and the answer finishes the run.
//!
//! ```text
//! cargo run --example durable_workflow
//! ```
//!
//! Each task appends its item to a side-effect file before returning; the example counts
//! the lines at the end. A task killed after its side effect but before its result was saved
//! runs again (at least once); every task whose result was saved ran exactly once.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use stategraph::functional::{Entrypoint, Outcome, entrypoint, task};
use stategraph::prelude::*;

const THREAD: &str = "order-42";

/// The workflow: process items 1..=10 in parallel, then ask for approval of the total.
fn workflow(effects: PathBuf) -> Entrypoint<u32, String> {
    let process = task("process", move |item: u32, _ctx| {
        let effects = effects.clone();
        async move {
            // Slow enough that the kill lands midway.
            tokio::time::sleep(Duration::from_millis(150 * u64::from(item))).await;
            let mut line = std::fs::read_to_string(&effects).unwrap_or_default();
            line.push_str(&format!("{item}\n"));
            std::fs::write(&effects, line).map_err(|e| NodeError::new(e.to_string()))?;
            Ok(item * item)
        }
    });
    entrypoint("fulfil_order", move |items: u32, ctx| {
        // All calls start now and run in parallel; each result is saved when it is ready.
        let calls: Vec<_> = (1..=items).map(|i| process.call(&ctx, i)).collect();
        async move {
            let mut total = 0;
            for call in calls {
                total += call.await?;
            }
            let answer = ctx.interrupt(value!({"approve_total": total}))?;
            Ok(format!("total {total}: {}", answer.as_str().unwrap_or("?")))
        }
    })
}

async fn open(db: &Path) -> Result<Entrypoint<u32, String>, Box<dyn std::error::Error>> {
    let saver = SqliteConfig::file(db).connect().await?;
    Ok(workflow(db.with_extension("effects")).with_checkpointer(Arc::new(saver)))
}

/// The child process: start the workflow, or continue it after a crash.
async fn child(db: &Path, start: bool) -> Result<(), Box<dyn std::error::Error>> {
    let wf = open(db).await?;
    // `sync`: a task's result is on disk before its caller goes on.
    let config = RunConfig::thread(THREAD).with_durability(Durability::Sync);
    let outcome = if start {
        wf.invoke(10, config).await?
    } else {
        wf.continue_run(config).await?
    };
    if let Outcome::Interrupted(asks) = outcome {
        println!("  [worker] waiting for approval: {}", asks[0].value);
    }
    Ok(())
}

fn spawn(db: &Path, mode: &str) -> std::io::Result<Child> {
    Command::new(std::env::current_exe()?)
        .arg(mode)
        .arg(db)
        .spawn()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, mode, db] = args.as_slice() {
        return child(Path::new(db), mode == "--start").await;
    }
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("workflow.sqlite");
    let effects = db.with_extension("effects");

    println!("1. A worker starts the workflow (10 tasks in parallel) ...");
    let mut worker = spawn(&db, "--start")?;
    while lines(&effects).len() < 4 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.kill()?;
    worker.wait()?;
    println!(
        "   ... and is killed after items {:?} ran.",
        lines(&effects)
    );

    println!("2. A new worker continues the thread:");
    spawn(&db, "--continue")?.wait()?;

    println!("3. A human approves:");
    let wf = open(&db).await?;
    let done = wf
        .resume(Resume::Value("approved".into()), RunConfig::thread(THREAD))
        .await?;
    println!("   {done:?}");

    let ran = lines(&effects);
    println!("4. Side effects: {} for 10 items.", ran.len());
    for item in 1..=10 {
        let n = ran.iter().filter(|l| **l == item.to_string()).count();
        println!("   item {item:>2}: ran {n} time(s)");
    }
    Ok(())
}
