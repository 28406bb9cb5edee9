//! Benchmarks of stategraph against Python LangGraph (not published).
//!
//! One [`Workload`] trait, implemented by every workload of `bench/WORKLOADS.md` (the contract
//! both sides follow: the same graphs, sizes and JSON output as `bench/python/run.py`), run
//! on every [`BackendKind`]. The `stategraph-bench` binary prints one JSON object per run;
//! `bench/compare` runs both sides alternately and turns their output into a table and SVG
//! charts ([`report`], [`chart`]).
//!
//! ```
//! use stategraph_bench::{BackendKind, Params, run};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let params = Params { n: Some(10), runs: Some(2), ..Params::new("linear", BackendKind::Memory) };
//! let out = run(&params).await?;
//! assert_eq!(out["workload"], "linear");
//! assert_eq!(out["steps"], 10);
//! assert!(out["median_ms"].as_f64().unwrap() > 0.0);
//! # Ok::<(), stategraph_bench::BenchError>(()) }).unwrap();
//! ```

use std::time::Instant;

use serde_json::{Value as Json, json};

pub mod backend;
pub mod chart;
mod floor;
mod read_floor;
pub mod report;
pub mod workloads;

pub use backend::{Backend, BackendKind, DbSize};

/// What can go wrong in a benchmark run.
#[derive(Debug)]
#[non_exhaustive]
pub enum BenchError {
    /// No workload has this name.
    UnknownWorkload(String),
    /// A backend could not be opened, measured or removed.
    Backend {
        /// The backend.
        backend: &'static str,
        /// What failed.
        message: String,
    },
    /// A graph failed or returned something the workload did not expect.
    Run {
        /// The workload.
        workload: &'static str,
        /// What failed.
        message: String,
    },
    /// Reading or writing results and charts.
    Io(String),
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownWorkload(w) => write!(
                f,
                "unknown workload `{w}` (expected one of: {})",
                workloads::NAMES.join(", ")
            ),
            Self::Backend { backend, message } => write!(f, "{backend}: {message}"),
            Self::Run { workload, message } => write!(f, "{workload}: {message}"),
            Self::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for BenchError {}

/// How to run a workload (the binary's command line).
#[derive(Clone, Debug)]
pub struct Params {
    /// The workload's name (`bench/WORKLOADS.md`).
    pub workload: String,
    /// The backend.
    pub backend: BackendKind,
    /// The database URL (or SQLite file) instead of the default.
    pub db: Option<String>,
    /// The workload's size instead of its default.
    pub n: Option<usize>,
    /// Timed runs instead of the workload's default.
    pub runs: Option<usize>,
    /// `chat`/`history`: store `messages` as deltas.
    pub delta: bool,
    /// The delta snapshot frequency (default 100).
    pub snapshot_every: u32,
}

impl Params {
    /// `workload` on `backend` with every default.
    pub fn new(workload: &str, backend: BackendKind) -> Self {
        Self {
            workload: workload.to_owned(),
            backend,
            db: None,
            n: None,
            runs: None,
            delta: false,
            snapshot_every: 100,
        }
    }
}

/// What a workload measured: timed samples (ms) and what it adds to the JSON output.
#[derive(Debug, Default)]
pub struct Measurement {
    /// One sample per timed run (per turn for `chat`).
    pub samples_ms: Vec<f64>,
    /// Super-steps of one invoke, where defined.
    pub steps: Option<usize>,
    /// Workload-specific fields (`turn_ms`, `checkpoints`, …).
    pub extra: serde_json::Map<String, Json>,
}

/// The unit a workload's per-unit figure is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// `ms_per_step`: the median divided by the super-steps.
    Step,
    /// `ms_per_invoke`: the median itself.
    Invoke,
    /// `ms_per_checkpoint`: the median divided by the checkpoints listed.
    Checkpoint,
    /// `ms_per_commit`: the median itself (one commit a run).
    Commit,
}

/// What a workload is called and its defaults.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Its name on the command line.
    pub name: &'static str,
    /// Its default size.
    pub n: usize,
    /// Its default number of timed runs.
    pub runs: usize,
    /// What the per-unit figure divides by.
    pub unit: Unit,
}

impl Spec {
    /// A spec.
    pub const fn new(name: &'static str, n: usize, runs: usize, unit: Unit) -> Self {
        Self {
            name,
            n,
            runs,
            unit,
        }
    }
}

/// A benchmark workload, the same definition as its Python twin.
#[async_trait::async_trait]
pub trait Workload: Send + Sync {
    /// Its name and defaults.
    fn spec(&self) -> Spec;
    /// Runs it on `backend` (`runs` timed runs of size `n`, after any untimed set-up).
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        params: &Params,
    ) -> Result<Measurement, BenchError>;
}

/// Times `runs` calls of `f` after one untimed warm-up call (see [`timed_runs`]).
pub async fn repeat<T, F, Fut>(runs: usize, mut f: F) -> Result<Vec<f64>, BenchError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, BenchError>>,
{
    f().await?;
    timed_runs(runs, f).await
}

/// Times `runs` calls of `f`. What a call returns is dropped after its clock stops, as the
/// Python harness frees a call's result outside its timed region.
pub async fn timed_runs<T, F, Fut>(runs: usize, mut f: F) -> Result<Vec<f64>, BenchError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, BenchError>>,
{
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let out = f().await?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
        drop(out);
    }
    Ok(samples)
}

/// The median of `xs` (the mean of the middle two for an even count); 0 when empty.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Runs `params` and returns the JSON object of `bench/WORKLOADS.md`.
pub async fn run(params: &Params) -> Result<Json, BenchError> {
    let workload = workloads::by_name(&params.workload)?;
    let spec = workload.spec();
    let n = params.n.unwrap_or(spec.n);
    let runs = params.runs.unwrap_or(spec.runs).max(1);
    let backend = Backend::open(params.backend, params.db.as_deref()).await?;
    let result = workload.measure(&backend, n, runs, params).await;
    let size = match &result {
        Ok(_) => backend.size().await,
        Err(_) => Ok(None),
    };
    backend.remove().await?;
    let m = result?;
    let size = size?;

    let med = median(&m.samples_ms);
    let min = m.samples_ms.iter().copied().fold(f64::INFINITY, f64::min);
    let mut out = json!({
        "impl": "stategraph",
        "version": concat!("stategraph ", env!("CARGO_PKG_VERSION")),
        "workload": spec.name,
        "backend": params.backend.as_str(),
        "n": n,
        "runs": m.samples_ms.len(),
        "durability": "async",
        "median_ms": round(med),
        "min_ms": round(if min.is_finite() { min } else { 0.0 }),
    });
    let per = |d: usize| round(med / d.max(1) as f64);
    match spec.unit {
        Unit::Step => out["ms_per_step"] = json!(per(m.steps.unwrap_or(n))),
        Unit::Invoke => out["ms_per_invoke"] = json!(round(med)),
        Unit::Commit => out["ms_per_commit"] = json!(round(med)),
        Unit::Checkpoint => {
            let cps = m
                .extra
                .get("checkpoints")
                .and_then(Json::as_u64)
                .unwrap_or(1);
            out["ms_per_checkpoint"] = json!(per(usize::try_from(cps).unwrap_or(1)));
        }
    }
    if let Some(steps) = m.steps {
        out["steps"] = json!(steps);
    }
    if let Some(size) = size {
        out["db_bytes"] = json!(size.bytes);
        out["rows"] = Json::Object(size.rows.into_iter().map(|(k, v)| (k, json!(v))).collect());
    }
    if let Json::Object(o) = &mut out {
        o.extend(m.extra);
    }
    Ok(out)
}

/// Rounds a sample for the JSON output (0.1 µs).
pub fn ms(x: f64) -> Json {
    json!(round(x))
}
