//! `stategraph-bench WORKLOAD --backend B [--db URL] [--n N] [--runs R] [--delta] [--json]`
//! runs one workload of `bench/WORKLOADS.md` and prints its figures (one JSON object with
//! `--json`); `stategraph-bench report RESULTS.jsonl [--charts DIR]` turns the JSON lines of
//! `bench/compare` into a table of medians and ratios, and SVG charts.

use std::process::ExitCode;

use clap::Parser;
use stategraph_bench::{BackendKind, Params, report, workloads};

/// Runs one benchmark workload.
#[derive(Parser, Debug)]
#[command(name = "stategraph-bench", version, after_help = workloads_help())]
struct RunArgs {
    /// The workload (see below).
    workload: String,
    /// The checkpointer (`none`: compiled without one).
    #[arg(long, value_enum)]
    backend: BackendKind,
    /// Database URL (SQLite: the file to create) instead of the local test service.
    #[arg(long)]
    db: Option<String>,
    /// The workload's size (nodes, width, turns, tool rounds, …).
    #[arg(long)]
    n: Option<usize>,
    /// Timed runs.
    #[arg(long)]
    runs: Option<usize>,
    /// `chat`/`history`: store `messages` as deltas.
    #[arg(long)]
    delta: bool,
    /// The delta snapshot frequency.
    #[arg(long, default_value_t = 100)]
    snapshot_every: u32,
    /// Print one JSON object (`bench/WORKLOADS.md`) instead of a summary line.
    #[arg(long)]
    json: bool,
}

/// Turns `bench/compare`'s JSON lines into a table and charts.
#[derive(Parser, Debug)]
#[command(name = "stategraph-bench report")]
struct ReportArgs {
    /// A file of JSON lines, one result each, from both sides.
    results: std::path::PathBuf,
    /// Write the SVG charts into this directory.
    #[arg(long)]
    charts: Option<std::path::PathBuf>,
}

fn workloads_help() -> String {
    format!(
        "Workloads: {}.\nExample: stategraph-bench linear --backend sqlite --json\n\
         Report:   stategraph-bench report results.jsonl --charts bench/charts",
        workloads::NAMES.join(", ")
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = if args.get(1).map(String::as_str) == Some("report") {
        let r = ReportArgs::parse_from(args.iter().skip(1));
        report::report_file(&r.results, r.charts.as_deref()).map(|table| print!("{table}"))
    } else {
        let a = RunArgs::parse_from(&args);
        let params = Params {
            workload: a.workload,
            backend: a.backend,
            db: a.db,
            n: a.n,
            runs: a.runs,
            delta: a.delta,
            snapshot_every: a.snapshot_every,
        };
        run(&params, a.json)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stategraph-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(params: &Params, json: bool) -> Result<(), stategraph_bench::BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| stategraph_bench::BenchError::Io(e.to_string()))?;
    let out = runtime.block_on(stategraph_bench::run(params))?;
    if json {
        println!("{out}");
    } else {
        println!("{}", report::summary(&out));
    }
    Ok(())
}
