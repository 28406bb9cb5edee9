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

/// The table of medians (Markdown): one row per figure, stategraph beside Python and the
/// ratio Python / stategraph (how many times faster, or smaller, stategraph is).
pub fn table(groups: &Groups) -> String {
    let mut t = String::from(
        "| workload | backend | figure | stategraph | Python LangGraph | ratio |\n\
         |---|---|---|---:|---:|---:|\n",
    );
    let row = |t: &mut String, w: &str, b: &str, fig: &str, r: Option<f64>, p: Option<f64>| {
        let _ = writeln!(
            t,
            "| {w} | {b} | {fig} | {} | {} | {} |",
            num(r),
            num(p),
            ratio(r, p)
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
        row(
            &mut t,
            &label,
            backend,
            &unit.replace('_', " "),
            med_of(rust, fig),
            med_of(py, fig),
        );
        if workload == "chat" {
            let get = |k: &'static str| move |r: &Json| r[k].as_f64();
            let growth = |r: &Json| Some(r["last20_ms"].as_f64()? / r["first20_ms"].as_f64()?);
            row(
                &mut t,
                &label,
                backend,
                "ms per invoke, first 20 turns",
                med_of(rust, get("first20_ms")),
                med_of(py, get("first20_ms")),
            );
            row(
                &mut t,
                &label,
                backend,
                "ms per invoke, last 20 turns",
                med_of(rust, get("last20_ms")),
                med_of(py, get("last20_ms")),
            );
            let (rg, pg) = (med_of(rust, growth), med_of(py, growth));
            let _ = writeln!(
                t,
                "| {label} | {backend} | last 20 / first 20 | {} | {} | |",
                num(rg),
                num(pg)
            );
            if rust.iter().chain(py).any(|r| r["db_bytes"].is_number()) {
                row(
                    &mut t,
                    &label,
                    backend,
                    "db bytes (MB)",
                    med_of(rust, get("db_bytes")).map(|b| b / 1e6),
                    med_of(py, get("db_bytes")).map(|b| b / 1e6),
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
                    "chat: stategraph --delta vs Python full",
                    backend,
                    "db bytes (MB)",
                    Some(r / 1e6),
                    Some(p / 1e6),
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
