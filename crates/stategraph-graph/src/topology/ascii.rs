//! A [`Topology`] as ASCII art, drawn exactly as LangChain's `Graph.draw_ascii()` draws it:
//! boxes placed by the layered layout (`sugiyama`), edges as lines of `*` (`.` for a
//! conditional edge) drawn first, boxes over them.

// Vertex and edge indices are positions in the drawing's own lists, which the layout was
// built from.
#![allow(clippy::indexing_slicing)]

use super::Topology;
use super::sugiyama::Layout;

/// Why a graph cannot be drawn as ASCII art.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawAsciiError {
    /// The drawing has no nodes.
    #[error("cannot draw an empty graph")]
    Empty,
    /// An edge names a node the drawing does not have.
    #[error("edge `{from}` → `{to}` names a node the drawing does not have")]
    UnknownNode {
        /// The edge's source.
        from: String,
        /// The edge's target.
        to: String,
    },
    /// A node has an edge to itself, which the layout cannot route (LangChain fails the
    /// same way).
    #[error("cannot draw node `{node}`'s edge to itself")]
    SelfLoop {
        /// The node.
        node: String,
    },
}

/// A grid of characters, `cols` wide and `lines` high.
struct Canvas {
    cols: usize,
    grid: Vec<Vec<char>>,
}

impl Canvas {
    fn new(cols: usize, lines: usize) -> Self {
        Self {
            cols,
            grid: vec![vec![' '; cols]; lines],
        }
    }

    /// Puts `c` at (`x`, `y`); a point outside is dropped.
    fn point(&mut self, x: i64, y: i64, c: char) {
        let (Ok(x), Ok(y)) = (usize::try_from(x), usize::try_from(y)) else {
            return;
        };
        if x < self.cols
            && let Some(row) = self.grid.get_mut(y)
        {
            row[x] = c;
        }
    }

    /// A straight line of `c` between two points, stepping along the longer axis.
    fn line(&mut self, mut x0: i64, mut y0: i64, mut x1: i64, mut y1: i64, c: char) {
        if x0 > x1 {
            std::mem::swap(&mut x0, &mut x1);
            std::mem::swap(&mut y0, &mut y1);
        }
        let (dx, dy) = (x1 - x0, y1 - y0);
        let step = |from: i64, along: i64, by: i64, over: i64| -> i64 {
            from + ((along as f64) * (by as f64) / (over as f64)).round_ties_even() as i64
        };
        if dx == 0 && dy == 0 {
            self.point(x0, y0, c);
        } else if dx.abs() >= dy.abs() {
            for x in x0..=x1 {
                let y = if dx == 0 {
                    y0
                } else {
                    step(y0, x - x0, dy, dx)
                };
                self.point(x, y, c);
            }
        } else if y0 < y1 {
            for y in y0..=y1 {
                let x = if dy == 0 {
                    x0
                } else {
                    step(x0, y - y0, dx, dy)
                };
                self.point(x, y, c);
            }
        } else {
            for y in y1..=y0 {
                let x = if dy == 0 {
                    x0
                } else {
                    step(x1, y - y1, dx, dy)
                };
                self.point(x, y, c);
            }
        }
    }

    fn text(&mut self, x: i64, y: i64, text: &str) {
        for (i, c) in text.chars().enumerate() {
            self.point(x + i as i64, y, c);
        }
    }

    /// A box of `+`, `-` and `|` with its top-left corner at (`x0`, `y0`).
    fn rect(&mut self, x0: i64, y0: i64, width: i64, height: i64) {
        let (w, h) = (width - 1, height - 1);
        for x in x0..x0 + w {
            self.point(x, y0, '-');
            self.point(x, y0 + h, '-');
        }
        for y in y0..y0 + h {
            self.point(x0, y, '|');
            self.point(x0 + w, y, '|');
        }
        for (x, y) in [(x0, y0), (x0 + w, y0), (x0, y0 + h), (x0 + w, y0 + h)] {
            self.point(x, y, '+');
        }
    }

    fn draw(self) -> String {
        let lines: Vec<String> = self.grid.into_iter().map(String::from_iter).collect();
        lines.join("\n")
    }
}

/// A box is this high: its borders and one line of text.
const BOX_HEIGHT: f64 = 3.0;

impl Topology {
    /// The graph as ASCII art, as LangChain's `Graph.draw_ascii()` draws it (what
    /// LangGraph's `get_graph().print_ascii()` prints): a box per node named by its last
    /// `:`-separated segment, laid out top-down in layers, edges of `*` (conditional ones of
    /// `.`). As there, only the part connected to the first node is drawn, and lines keep
    /// their trailing spaces. Where long or crossing edges compete for a place, LangChain's
    /// result depends on the order Python's memory allocator gives its edges and can vary
    /// from run to run; here the edges are taken in [`edges`](Self::edges) order, always.
    ///
    /// ```
    /// use stategraph_checkpoint::Map;
    /// use stategraph_graph::{DynState, END, START, Schema, StateGraph};
    /// let mut g = StateGraph::<DynState>::with_schema(Schema::new().last_value("x"));
    /// g.add_node("a", |_s, _c| async { Ok(Map::new()) });
    /// g.add_edge(START, "a").add_edge("a", END);
    /// let art = g.compile().unwrap().topology().draw_ascii().unwrap();
    /// assert_eq!(art.lines().nth(1), Some("| __start__ |  "));
    /// assert_eq!(art.lines().nth(7), Some("    | a |      "));
    /// ```
    pub fn draw_ascii(&self) -> Result<String, DrawAsciiError> {
        if self.nodes.is_empty() {
            return Err(DrawAsciiError::Empty);
        }
        let labels: Vec<String> = self
            .nodes
            .iter()
            .map(|id| format!(" {} ", super::node_name(id)))
            .collect();
        let boxes: Vec<(f64, f64)> = labels
            .iter()
            .map(|l| ((l.chars().count() + 2) as f64, BOX_HEIGHT))
            .collect();
        let index = |id: &str| self.nodes.iter().position(|n| n == id);
        let mut edges = Vec::with_capacity(self.edges.len());
        for e in &self.edges {
            let (Some(s), Some(t)) = (index(&e.source), index(&e.target)) else {
                return Err(DrawAsciiError::UnknownNode {
                    from: e.source.clone(),
                    to: e.target.clone(),
                });
            };
            edges.push((s, t));
        }
        let min_width = boxes.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
        let mut layout = Layout::new(&boxes, &edges, min_width);
        if let Some(&e) = layout.se.iter().find(|&&e| edges[e].0 == edges[e].1) {
            return Err(DrawAsciiError::SelfLoop {
                node: self.nodes[edges[e].0].clone(),
            });
        }
        layout.draw();
        let mut routes = Vec::with_capacity(layout.se.len());
        for &e in &layout.se {
            let points = layout.route(e).ok_or_else(|| DrawAsciiError::SelfLoop {
                node: self.nodes[edges[e].0].clone(),
            })?;
            routes.push((e, points));
        }
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for &v in &layout.sv {
            let ((x, y), w) = (layout.xy(v), boxes[v].0);
            xs.extend([x - w / 2.0, x + w / 2.0]);
            ys.extend([y, y + BOX_HEIGHT]);
        }
        for (_, points) in &routes {
            for &(x, y) in points {
                xs.push(x);
                ys.push(y);
            }
        }
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (minx, miny, maxx, maxy) = (min(&xs), min(&ys), max(&xs), max(&ys));
        let cols = (maxx.ceil() - minx.floor()).ceil() as usize + 1;
        let lines = (maxy - miny).round_ties_even() as usize;
        let mut canvas = Canvas::new(cols, lines);
        let at = |v: f64, from: f64| (v - from).round_ties_even() as i64;
        for (e, points) in &routes {
            let c = if self.edges[*e].conditional { '.' } else { '*' };
            for pair in points.windows(2) {
                let [(x0, y0), (x1, y1)] = [pair[0], pair[1]];
                canvas.line(at(x0, minx), at(y0, miny), at(x1, minx), at(y1, miny), c);
            }
        }
        for &v in &layout.sv {
            let ((x, y), w) = (layout.xy(v), boxes[v].0);
            let (left, top) = (at(x - w / 2.0, minx), at(y, miny));
            canvas.rect(left, top, w as i64, BOX_HEIGHT as i64);
            canvas.text(left + 1, top + 1, &labels[v]);
        }
        Ok(canvas.draw())
    }
}
