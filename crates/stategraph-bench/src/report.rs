//! Turning results into words: the one-line summary of a run, and `bench/compare`'s table of
//! medians and Rust/Python ratios.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value as Json;

use crate::{BenchError, median, workloads};

/// The per-unit figure of a result and its name.
pub fn unit_figure(r: &Json) -> Option<(&'static str, f64)> {
    [
        "ms_per_step",
        "ms_per_invoke",
        "ms_per_checkpoint",
        "ms_per_commit",
    ]
    .into_iter()
    .find_map(|k| r.get(k).and_then(Json::as_f64).map(|v| (k, v)))
}

/// Bytes in a human unit.
pub fn bytes(b: f64) -> String {
    match b {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} kB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// One line about one result.
pub fn summary(r: &Json) -> String {
    let mut s = format!(
        "{} on {} (n = {}): median {} ms, min {} ms over {} runs",
        r["workload"].as_str().unwrap_or("?"),
        r["backend"].as_str().unwrap_or("?"),
        r["n"],
        r["median_ms"],
        r["min_ms"],
        r["runs"],
    );
    if let Some((unit, v)) = unit_figure(r) {
        let _ = write!(
            s,
            ", {v} {}",
            unit.replace('_', " ").replacen("ms per", "ms/", 1)
        );
    }
    if let (Some(a), Some(b)) = (r["first20_ms"].as_f64(), r["last20_ms"].as_f64()) {
        let _ = write!(s, ", first 20 turns {a} ms, last 20 {b} ms");
    }
    if let Some(b) = r["db_bytes"].as_f64() {
        let _ = write!(s, ", {} stored", bytes(b));
    }
    s
}

/// Results grouped by what was measured: (workload, backend, delta) → impl → results.
pub type Groups = BTreeMap<(usize, String, String, bool), BTreeMap<String, Vec<Json>>>;

/// Reads JSON lines (blank lines and lines starting with `#` are skipped).
pub fn read_results(path: &Path) -> Result<Vec<Json>, BenchError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::Io(format!("{}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| BenchError::Io(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// Groups results (workloads in `bench/compare`'s order).
pub fn group(results: Vec<Json>) -> Groups {
    let mut groups = Groups::new();
    for r in results {
        let workload = r["workload"].as_str().unwrap_or_default().to_owned();
        let order = workloads::NAMES
            .iter()
            .position(|w| *w == workload)
            .unwrap_or(usize::MAX);
        let key = (
            order,
            workload,
            r["backend"].as_str().unwrap_or_default().to_owned(),
            r["delta"].as_bool().unwrap_or(false),
        );
        let side = r["impl"].as_str().unwrap_or_default().to_owned();
        groups
            .entry(key)
            .or_default()
            .entry(side)
            .or_default()
            .push(r);
    }
    groups
}

fn med_of(rs: &[Json], f: impl Fn(&Json) -> Option<f64>) -> Option<f64> {
    let xs: Vec<f64> = rs.iter().filter_map(f).collect();
    (!xs.is_empty()).then(|| median(&xs))
}

fn num(x: Option<f64>) -> String {
    match x {
        None => "—".to_owned(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.4}"),
    }
}

fn ratio(rust: Option<f64>, python: Option<f64>) -> String {
    match (rust, python) {
        (Some(r), Some(p)) if r > 0.0 => format!("{:.1}×", p / r),
        _ => "—".to_owned(),
    }
}

/// A target a figure is held to (the targets the benchmark issues set).
#[derive(Clone, Copy)]
enum Target {
    /// Python ÷ stategraph at least this.
    Ratio(f64),
    /// stategraph's figure at most this (last 20 turns ÷ first 20, a listing ÷ its read
    /// floor).
    AtMost(f64),
}

/// (workload, backend, delta, figure) → target. `figure` is the per-unit figure (`unit`) or
/// `growth` (last 20 turns ÷ first 20).
const TARGETS: &[(&str, &str, bool, &str, Target)] = &[
    // Full storage on Postgres: the server stores the growing message list twice a turn.
    ("chat", "postgres", false, "unit", Target::Ratio(4.0)),
    ("chat", "postgres", false, "growth", Target::AtMost(2.0)),
    ("linear", "postgres", false, "unit", Target::Ratio(4.0)),
    ("fanout", "postgres", false, "unit", Target::Ratio(10.0)),
    ("chat", "sqlite", false, "unit", Target::Ratio(6.0)),
    ("linear", "memory", false, "unit", Target::Ratio(20.0)),
    ("chat", "memory", false, "unit", Target::Ratio(20.0)),
    (
        "sequential_1000",
        "memory",
        false,
        "unit",
        Target::Ratio(10.0),
    ),
    ("history", "sqlite", false, "unit", Target::Ratio(4.0)),
    ("history", "postgres", false, "unit", Target::Ratio(8.0)),
    ("history", "memory", false, "unit", Target::Ratio(40.0)),
    ("history", "sqlite", false, "floor", Target::AtMost(2.0)),
    ("history", "postgres", false, "floor", Target::AtMost(2.0)),
    ("chat", "memory", false, "growth", Target::AtMost(1.3)),
    ("chat", "sqlite", true, "growth", Target::AtMost(1.3)),
    ("chat", "postgres", true, "growth", Target::AtMost(1.3)),
];

fn target_of(workload: &str, backend: &str, delta: bool, figure: &str) -> Option<Target> {
    TARGETS
        .iter()
        .find(|(w, b, d, f, _)| *w == workload && *b == backend && *d == delta && *f == figure)
        .map(|(.., t)| *t)
        // Postgres is held to being faster than Python everywhere.
        .or_else(|| {
            (backend == "postgres" && figure == "unit" && workload != "commit_floor")
                .then_some(Target::Ratio(1.0))
        })
}

/// The target cell: what is asked and whether the figures meet it.
fn target_cell(target: Option<Target>, rust: Option<f64>, python: Option<f64>) -> String {
    match target {
        None => String::new(),
        Some(Target::Ratio(min)) => match (rust, python) {
            (Some(r), Some(p)) if r > 0.0 => {
                let met = if p / r >= min { "met" } else { "missed" };
                format!("≥ {min}×: {met}")
            }
            _ => format!("≥ {min}×"),
        },
        Some(Target::AtMost(max)) => match rust {
            Some(g) => {
                let met = if g <= max { "met" } else { "missed" };
                format!("≤ {max}: {met}")
            }
            None => format!("≤ {max}"),
        },
    }
}

/// The median commit floor (`commit_floor`, 2 KB rows) of each database backend, measured by
/// stategraph's harness in the same run.
fn floors(groups: &Groups) -> BTreeMap<String, f64> {
    groups
        .iter()
        .filter(|((_, w, _, _), _)| w == "commit_floor")
        .filter_map(|((_, _, b, _), sides)| {
            let rs: Vec<Json> = sides
                .get("stategraph")?
                .iter()
                .filter(|r| r["n"].as_u64() == Some(2048))
                .cloned()
                .collect();
            Some((b.clone(), med_of(&rs, |r| r["ms_per_commit"].as_f64())?))
        })
        .collect()
}

/// A time as a multiple of the backend's commit floor.
fn over_floor(ms: Option<f64>, floor: Option<f64>) -> String {
    match (ms, floor) {
        (Some(m), Some(f)) if f > 0.0 => format!("{:.1}", m / f),
        _ => String::new(),
    }
}

/// The table of medians (Markdown): one row per figure, stategraph beside Python and the
/// ratio Python / stategraph (how many times faster, or smaller, stategraph is); database
/// times also as multiples of that database's commit floor measured in the same run; and
/// the targets the figures are held to.
pub fn table(groups: &Groups) -> String {
    let floors = floors(groups);
    let mut t = String::from(
        "| workload | backend | figure | stategraph | Python LangGraph | ratio | \
         stategraph ÷ floor | Python ÷ floor | target |\n\
         |---|---|---|---:|---:|---:|---:|---:|---|\n",
    );
    struct Row<'a> {
        workload: &'a str,
        backend: &'a str,
        figure: &'a str,
        rust: Option<f64>,
        python: Option<f64>,
        /// A time whose floor multiples are shown.
        timed: bool,
        target: Option<Target>,
        /// Whether the Python ÷ stategraph ratio means something here.
        compared: bool,
    }
    let row = |t: &mut String, r: Row<'_>| {
        let floor = if r.timed {
            floors.get(r.backend).copied()
        } else {
            None
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.backend,
            r.figure,
            num(r.rust),
            num(r.python),
            if r.compared {
                ratio(r.rust, r.python)
            } else {
                String::new()
            },
            over_floor(r.rust, floor),
            over_floor(r.python, floor),
            target_cell(r.target, r.rust, r.python),
        );
    };
    for ((_, workload, backend, delta), sides) in groups {
        let none = Vec::new();
        let rust = sides.get("stategraph").unwrap_or(&none);
        let py = sides.get("python").unwrap_or(&none);
        let label = if *delta {
            format!("{workload} --delta")
        } else {
            workload.clone()
        };
        let unit = rust
            .iter()
            .chain(py)
            .find_map(unit_figure)
            .map_or("ms", |(u, _)| u);
        let fig = |r: &Json| unit_figure(r).map(|(_, v)| v);
        let figure = if workload == "commit_floor" {
            let bytes = rust.first().and_then(|r| r["n"].as_u64()).unwrap_or(0);
            format!(
                "{} ({} row)",
                unit.replace('_', " "),
                crate::report::bytes(bytes as f64)
            )
        } else {
            unit.replace('_', " ")
        };
        row(
            &mut t,
            Row {
                workload: &label,
                backend,
                figure: &figure,
                rust: med_of(rust, fig),
                python: med_of(py, fig),
                timed: workload != "commit_floor",
                target: target_of(workload, backend, *delta, "unit"),
                compared: true,
            },
        );
        if workload == "history" && rust.iter().any(|r| r["read_floor_ms"].is_number()) {
            let floor = |r: &Json| r["read_floor_ms_per_checkpoint"].as_f64();
            row(
                &mut t,
                Row {
                    workload: &label,
                    backend,
                    figure: "read floor, ms per checkpoint",
                    rust: med_of(rust, floor),
                    python: None,
                    timed: false,
                    target: None,
                    compared: false,
                },
            );
            row(
                &mut t,
                Row {
                    workload: &label,
                    backend,
                    figure: "listing ÷ read floor",
                    rust: med_of(rust, |r| Some(fig(r)? / floor(r)?)),
                    python: None,
                    timed: false,
                    target: target_of(workload, backend, *delta, "floor"),
                    compared: false,
                },
            );
        }
        if workload == "chat" {
            let get = |k: &'static str| move |r: &Json| r[k].as_f64();
            let growth = |r: &Json| Some(r["last20_ms"].as_f64()? / r["first20_ms"].as_f64()?);
            for (figure, key) in [
                ("ms per invoke, first 20 turns", "first20_ms"),
                ("ms per invoke, last 20 turns", "last20_ms"),
            ] {
                row(
                    &mut t,
                    Row {
                        workload: &label,
                        backend,
                        figure,
                        rust: med_of(rust, get(key)),
                        python: med_of(py, get(key)),
                        timed: true,
                        target: None,
                        compared: true,
                    },
                );
            }
            row(
                &mut t,
                Row {
                    workload: &label,
                    backend,
                    figure: "last 20 / first 20",
                    rust: med_of(rust, growth),
                    python: med_of(py, growth),
                    timed: false,
                    target: target_of(workload, backend, *delta, "growth"),
                    compared: false,
                },
            );
            if rust.iter().chain(py).any(|r| r["db_bytes"].is_number()) {
                row(
                    &mut t,
                    Row {
                        workload: &label,
                        backend,
                        figure: "db bytes (MB)",
                        rust: med_of(rust, get("db_bytes")).map(|b| b / 1e6),
                        python: med_of(py, get("db_bytes")).map(|b| b / 1e6),
                        timed: false,
                        target: None,
                        compared: true,
                    },
                );
            }
        }
    }
    // The storage target: stategraph's delta chat against Python's full storage.
    for ((_, workload, backend, delta), sides) in groups {
        if workload != "chat" || !*delta {
            continue;
        }
        let full = groups
            .iter()
            .find(|((_, w, b, d), _)| w == "chat" && b == backend && !*d)
            .and_then(|(_, s)| s.get("python"));
        let rust = sides.get("stategraph");
        if let (Some(rust), Some(full)) = (rust, full) {
            let bytes = |r: &Json| r["db_bytes"].as_f64();
            if let (Some(r), Some(p)) = (med_of(rust, bytes), med_of(full, bytes)) {
                row(
                    &mut t,
                    Row {
                        workload: "chat: stategraph --delta vs Python full",
                        backend,
                        figure: "db bytes (MB)",
                        rust: Some(r / 1e6),
                        python: Some(p / 1e6),
                        timed: false,
                        target: None,
                        compared: true,
                    },
                );
            }
        }
    }
    t
}

/// Reads `path`, writes the charts into `charts` (if given) and returns the report: the
/// versions and durability of both sides, then the table.
pub fn report_file(path: &Path, charts: Option<&Path>) -> Result<String, BenchError> {
    let results = read_results(path)?;
    let mut head = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for r in &results {
        let line = format!(
            "- {}: {}, durability `{}`",
            r["impl"].as_str().unwrap_or("?"),
            r["version"].as_str().unwrap_or("?"),
            r["durability"].as_str().unwrap_or("?")
        );
        if seen.insert(line.clone()) {
            head.push_str(&line);
            head.push('\n');
        }
    }
    let groups = group(results);
    if let Some(dir) = charts {
        for file in crate::chart::chat_charts(&groups, dir)? {
            let _ = writeln!(head, "- chart: {}", file.display());
        }
    }
    Ok(format!("{head}\n{}", table(&groups)))
}
