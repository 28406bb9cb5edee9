//! SVG charts of the `chat` workload, per backend: latency of each turn, and database bytes
//! against turns — stategraph (full and delta) beside Python LangGraph.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value as Json;

use crate::BenchError;
use crate::report::Groups;

/// One line of a chart.
struct Series {
    label: String,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

const COLORS: [RGBColor; 4] = [
    RGBColor(0xd9, 0x5f, 0x02), // stategraph
    RGBColor(0x1b, 0x9e, 0x77), // stategraph delta
    RGBColor(0x75, 0x70, 0xb3), // Python
    RGBColor(0xe7, 0x29, 0x8a), // Python delta
];

fn io(e: impl std::fmt::Display) -> BenchError {
    BenchError::Io(format!("chart: {e}"))
}

/// Rolling median over `window` turns (single turns jitter with the scheduler).
fn smooth(xs: &[f64], window: usize) -> Vec<(f64, f64)> {
    (0..xs.len())
        .map(|i| {
            let lo = i.saturating_sub(window / 2);
            let hi = (i + window / 2 + 1).min(xs.len());
            ((i + 1) as f64, crate::median(&xs[lo..hi]))
        })
        .collect()
}

/// The chat results of `backend`, one series per side and storage mode.
fn series_of(
    groups: &Groups,
    backend: &str,
    pick: impl Fn(&Json) -> Vec<(f64, f64)>,
) -> Vec<Series> {
    let mut out = Vec::new();
    for ((_, workload, b, delta), sides) in groups {
        if workload != "chat" || b != backend {
            continue;
        }
        for (side, results) in sides {
            // The run with the median total time stands for its side.
            let mut rs: Vec<&Json> = results.iter().collect();
            rs.sort_by(|a, b| {
                let t = |r: &Json| r["median_ms"].as_f64().unwrap_or(0.0);
                t(a).total_cmp(&t(b))
            });
            let Some(r) = rs.get(rs.len() / 2) else {
                continue;
            };
            let points = pick(r);
            if points.is_empty() {
                continue;
            }
            let python = side == "python";
            let name = if python {
                "Python LangGraph"
            } else {
                "stategraph"
            };
            out.push(Series {
                label: format!("{name}{}", if *delta { " (delta)" } else { "" }),
                color: COLORS[usize::from(python) * 2 + usize::from(*delta)],
                points,
            });
        }
    }
    out
}

fn draw(path: &Path, title: &str, y_desc: &str, series: &[Series]) -> Result<(), BenchError> {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| *y > 0.0)
        .collect();
    let x_max = xs.fold(1.0, f64::max);
    let y_min = ys.iter().copied().fold(f64::INFINITY, f64::min).max(1e-3) / 1.5;
    let y_max = ys.iter().copied().fold(0.0, f64::max).max(y_min * 2.0) * 1.5;
    let root = SVGBackend::new(path, (860, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, (y_min..y_max).log_scale())
        .map_err(io)?;
    chart
        .configure_mesh()
        .x_desc("turn")
        .y_desc(y_desc)
        .draw()
        .map_err(io)?;
    for s in series {
        let color = s.color;
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied().filter(|p| p.1 > 0.0),
                color.stroke_width(2),
            ))
            .map_err(io)?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(io)?;
    root.present().map_err(io)
}

/// Draws `chat-latency-<backend>.svg` and `chat-bytes-<backend>.svg` for every backend with
/// chat results into `dir`; returns the files written.
pub fn chat_charts(groups: &Groups, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir).map_err(io)?;
    let backends: std::collections::BTreeSet<&str> = groups
        .keys()
        .filter(|(_, w, _, _)| w == "chat")
        .map(|(_, _, b, _)| b.as_str())
        .collect();
    let mut files = Vec::new();
    for backend in backends {
        let latency = series_of(groups, backend, |r| {
            let turns: Vec<f64> = r["turn_ms"]
                .as_array()
                .map(|a| a.iter().filter_map(Json::as_f64).collect())
                .unwrap_or_default();
            smooth(&turns, 9)
        });
        if !latency.is_empty() {
            let path = dir.join(format!("chat-latency-{backend}.svg"));
            draw(
                &path,
                &format!("chat on {backend}: time per turn (rolling median of 9)"),
                "ms per invoke (log)",
                &latency,
            )?;
            files.push(path);
        }
        let bytes = series_of(groups, backend, |r| {
            r["bytes_by_turn"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()? / 1e6)))
                        .collect()
                })
                .unwrap_or_default()
        });
        if !bytes.is_empty() {
            let path = dir.join(format!("chat-bytes-{backend}.svg"));
            draw(
                &path,
                &format!("chat on {backend}: database size"),
                "MB (log)",
                &bytes,
            )?;
            files.push(path);
        }
    }
    Ok(files)
}
