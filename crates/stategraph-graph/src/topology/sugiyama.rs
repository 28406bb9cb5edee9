//! The layered (Sugiyama) layout LangChain's `draw_ascii()` places boxes with — grandalf's
//! `SugiyamaLayout` as `graph_ascii` configures it, step for step, so that a drawing here
//! puts every box and edge point where Python's does: the first connected component only,
//! feedback edges found depth-first and reversed, longest-path ranks pulled down toward their
//! successors, dummy vertices on long edges, one down-and-up then one downward barycenter
//! ordering pass with adjacent swaps, and Brandes–Köpf coordinates (four alignments, the
//! average of the middle two).

// Vertices and edges live in arenas and are named by their index there; every index used
// was handed out by the layout itself.
#![allow(clippy::indexing_slicing)]

use std::collections::{BTreeMap, HashMap};

/// A vertex: a node's box, or a dummy point on an edge that spans several layers.
struct Vertex {
    w: f64,
    h: f64,
    xy: (f64, f64),
    /// The edges touching it, in the order they were added.
    edges: Vec<usize>,
    /// For a dummy: the long edge it lies on.
    dummy_of: Option<usize>,
    rank: usize,
    pos: usize,
    bar: f64,
    /// Neighbors in the layer above (`[0]`) and below (`[1]`), long edges through their
    /// dummies; computed once.
    neighbors: Option<[Vec<usize>; 2]>,
    root: usize,
    align: usize,
    sink: usize,
    shift: f64,
    placed: Option<f64>,
    x: [f64; 4],
}

impl Vertex {
    fn new(w: f64, h: f64) -> Self {
        Self {
            w,
            h,
            xy: (0.0, 0.0),
            edges: Vec::new(),
            dummy_of: None,
            rank: 0,
            pos: 0,
            bar: 0.0,
            neighbors: None,
            root: 0,
            align: 0,
            sink: 0,
            shift: f64::INFINITY,
            placed: None,
            x: [0.0; 4],
        }
    }
}

/// An edge: its ends as currently oriented, and whether it closes a cycle.
struct Edge {
    v: (usize, usize),
    feedback: bool,
}

/// The layout of a graph's first connected component.
pub(super) struct Layout {
    vs: Vec<Vertex>,
    es: Vec<Edge>,
    /// The component's vertices and edges, in order.
    pub(super) sv: Vec<usize>,
    pub(super) se: Vec<usize>,
    layers: Vec<Vec<usize>>,
    /// Per layer: the bar step, `1 / (len - 1)` (1 for a layer of one).
    step: Vec<f64>,
    /// A long edge's points, by rank: its two ends and the dummies between.
    ctrls: HashMap<usize, BTreeMap<usize, usize>>,
    /// Feedback edges, reversed while ranking and ordering.
    reversed: Vec<usize>,
    dirh: i64,
    dirv: i64,
    xspace: f64,
    yspace: f64,
    conflicts: Vec<(usize, usize)>,
}

impl Layout {
    /// Lays out the first connected component of the graph of `boxes` (width, height) and
    /// `edges`; `xspace` is the gap between boxes of a layer, `yspace` between layers.
    /// Self-loops must have been refused before.
    pub(super) fn new(boxes: &[(f64, f64)], edges: &[(usize, usize)], xspace: f64) -> Self {
        let mut vs: Vec<Vertex> = boxes.iter().map(|&(w, h)| Vertex::new(w, h)).collect();
        let es: Vec<Edge> = edges.iter().map(|&v| Edge { v, feedback: false }).collect();
        // Components, merged edge by edge as grandalf merges them: the source's absorbs the
        // target's, and the first component left is drawn.
        let mut comp: Vec<usize> = (0..vs.len()).collect();
        let mut members: Vec<Vec<usize>> = (0..vs.len()).map(|v| vec![v]).collect();
        let mut alive: Vec<usize> = (0..vs.len()).collect();
        for (i, e) in es.iter().enumerate() {
            let (x, y) = e.v;
            for v in [x, y] {
                if !vs[v].edges.contains(&i) {
                    vs[v].edges.push(i);
                }
            }
            let (cx, cy) = (comp[x], comp[y]);
            if cx != cy {
                let moved = std::mem::take(&mut members[cy]);
                for &z in &moved {
                    comp[z] = cx;
                }
                members[cx].extend(moved);
                alive.retain(|&c| c != cy);
            }
        }
        let first = alive.first().copied().unwrap_or(0);
        let sv = members[first].clone();
        let se: Vec<usize> = (0..es.len())
            .filter(|&e| comp[es[e].v.0] == first)
            .collect();
        let mut widths: Vec<f64> = sv.iter().map(|&v| vs[v].w).collect();
        let mut heights: Vec<f64> = sv.iter().map(|&v| vs[v].h).collect();
        widths.sort_by(f64::total_cmp);
        heights.sort_by(f64::total_cmp);
        let (dw, dh) = (widths[widths.len() / 2], heights[heights.len() / 2]);
        let mut layout = Self {
            vs,
            es,
            sv,
            se,
            layers: Vec::new(),
            step: Vec::new(),
            ctrls: HashMap::new(),
            reversed: Vec::new(),
            dirh: 1,
            dirv: -1,
            xspace,
            yspace: 3.0,
            conflicts: Vec::new(),
        };
        layout.init(dw, dh);
        layout
    }

    /// `v`'s edges that lead into it (`into`) or out of it, as currently oriented.
    fn edges_at(&self, v: usize, into: bool) -> impl Iterator<Item = usize> + '_ {
        self.vs[v].edges.iter().copied().filter(move |&e| {
            let (tail, head) = self.es[e].v;
            if into { head == v } else { tail == v }
        })
    }

    /// The vertices `v`'s edges come from.
    fn incoming(&self, v: usize) -> Vec<usize> {
        self.edges_at(v, true).map(|e| self.es[e].v.0).collect()
    }

    /// The vertices `v`'s edges lead to.
    fn outgoing(&self, v: usize) -> Vec<usize> {
        self.edges_at(v, false).map(|e| self.es[e].v.1).collect()
    }

    /// Reverses (or restores) the feedback edges.
    fn invert(&mut self) {
        for &e in &self.reversed {
            let (a, b) = self.es[e].v;
            self.es[e].v = (b, a);
        }
    }

    /// Ranks, dummies and the first order of each layer.
    fn init(&mut self, dw: f64, dh: f64) {
        let roots: Vec<usize> = self
            .sv
            .iter()
            .copied()
            .filter(|&v| self.incoming(v).is_empty())
            .collect();
        self.mark_feedback(&roots);
        self.reversed = self
            .se
            .iter()
            .copied()
            .filter(|&e| self.es[e].feedback)
            .collect();
        self.invert();
        let mut unranked = roots.clone();
        unranked.extend(
            self.sv
                .iter()
                .copied()
                .filter(|&v| self.incoming(v).is_empty() && !roots.contains(&v)),
        );
        self.rank_init(unranked);
        self.rank_optimize();
        self.invert();
        for e in self.se.clone() {
            self.set_dummies(e, dw, dh);
        }
        self.step = self
            .layers
            .iter()
            .map(|l| {
                if l.len() > 1 {
                    1.0 / (l.len() - 1) as f64
                } else {
                    1.0
                }
            })
            .collect();
        for (r, layer) in self.layers.iter().enumerate() {
            for (i, &v) in layer.iter().enumerate() {
                self.vs[v].pos = i;
                self.vs[v].bar = i as f64 * self.step[r];
            }
        }
    }

    /// Tarjan's walk from the roots, then from every vertex not reached: an edge to a vertex
    /// still on the walk's path closes a cycle.
    fn mark_feedback(&mut self, roots: &[usize]) {
        let n = self.vs.len();
        let mut index = vec![0usize; n];
        let mut low = vec![0usize; n];
        let mut on_path = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut next = 1;
        let starts: Vec<usize> = roots.iter().chain(self.sv.iter()).copied().collect();
        for v in starts {
            if index[v] == 0 {
                self.visit(v, &mut index, &mut low, &mut on_path, &mut stack, &mut next);
            }
        }
    }

    fn visit(
        &mut self,
        v: usize,
        index: &mut [usize],
        low: &mut [usize],
        on_path: &mut [bool],
        stack: &mut Vec<usize>,
        next: &mut usize,
    ) {
        index[v] = *next;
        low[v] = *next;
        *next += 1;
        stack.push(v);
        on_path[v] = true;
        let out: Vec<usize> = self.edges_at(v, false).collect();
        for e in out {
            let w = self.es[e].v.1;
            if index[w] == 0 {
                self.visit(w, index, low, on_path, stack, next);
                low[v] = low[v].min(low[w]);
            } else if on_path[w] {
                self.es[e].feedback = true;
            }
            if stack.contains(&w) {
                low[v] = low[v].min(index[w]);
            }
        }
        if low[v] == index[v] {
            while let Some(top) = stack.pop() {
                if top == v {
                    break;
                }
            }
        }
        on_path[v] = false;
    }

    fn set_rank(&mut self, v: usize) {
        let preds = self.incoming(v);
        let r = preds
            .iter()
            .map(|&p| self.vs[p].rank as i64)
            .max()
            .unwrap_or(-1)
            + 1;
        let r = usize::try_from(r).unwrap_or(0);
        self.vs[v].rank = r;
        if r < self.layers.len() {
            self.layers[r].push(v);
        } else {
            self.layers.push(vec![v]);
        }
    }

    /// Longest-path ranks: a vertex is ranked once every edge into it has been seen.
    fn rank_init(&mut self, mut unranked: Vec<usize>) {
        let mut scanned = vec![false; self.es.len()];
        while !unranked.is_empty() {
            let mut wave: Vec<usize> = Vec::new();
            for v in unranked {
                self.set_rank(v);
                for e in self.edges_at(v, false) {
                    scanned[e] = true;
                }
                for x in self.outgoing(v) {
                    let ready = self.edges_at(x, true).all(|e| scanned[e]);
                    if ready && !wave.contains(&x) {
                        wave.push(x);
                    }
                }
            }
            unranked = wave;
        }
    }

    /// Pulls a vertex down to just above a successor when all its successors are at least
    /// that low.
    fn rank_optimize(&mut self) {
        for li in (0..self.layers.len()).rev() {
            for v in self.layers[li].clone() {
                let rv = self.vs[v].rank;
                for x in self.incoming(v) {
                    if self.outgoing(x).iter().all(|&y| self.vs[y].rank >= rv) {
                        let rx = self.vs[x].rank;
                        if let Some(at) = self.layers[rx].iter().position(|&y| y == x) {
                            self.layers[rx].remove(at);
                        }
                        self.vs[x].rank = rv - 1;
                        self.layers[rv - 1].push(x);
                    }
                }
            }
        }
    }

    /// Dummy vertices on an edge spanning more than one layer.
    fn set_dummies(&mut self, e: usize, dw: f64, dh: f64) {
        let (mut v0, mut v1) = self.es[e].v;
        let (mut r0, mut r1) = (self.vs[v0].rank, self.vs[v1].rank);
        if r0 > r1 {
            std::mem::swap(&mut v0, &mut v1);
            std::mem::swap(&mut r0, &mut r1);
        }
        if r1 - r0 > 1 {
            let mut ctrl = BTreeMap::from([(r0, v0), (r1, v1)]);
            for r in r0 + 1..r1 {
                let d = self.vs.len();
                let mut dummy = Vertex::new(dw, dh);
                dummy.dummy_of = Some(e);
                dummy.rank = r;
                self.vs.push(dummy);
                ctrl.insert(r, d);
                self.layers[r].push(d);
            }
            self.ctrls.insert(e, ctrl);
        }
    }

    /// `v`'s neighbors in the layer above (`dir` -1) or below (+1).
    fn neighbors(&mut self, v: usize, dir: i64) -> Vec<usize> {
        let side = usize::from(dir > 0);
        if let Some(n) = &self.vs[v].neighbors {
            return n[side].clone();
        }
        let computed = if let Some(e) = self.vs[v].dummy_of {
            let rank = self.vs[v].rank as i64;
            let at = |d: i64| {
                usize::try_from(rank + d)
                    .ok()
                    .and_then(|r| self.ctrls.get(&e).and_then(|c| c.get(&r)).copied())
                    .into_iter()
                    .collect::<Vec<_>>()
            };
            [at(-1), at(1)]
        } else {
            let mut out = [self.incoming(v), self.outgoing(v)];
            for (d, list) in [-1i64, 1].into_iter().zip(out.iter_mut()) {
                let target = self.vs[v].rank as i64 + d;
                for x in list.iter_mut() {
                    if self.vs[*x].rank as i64 == target {
                        continue;
                    }
                    let with = self.vs[v]
                        .edges
                        .iter()
                        .copied()
                        .find(|&e| self.es[e].v.0 == *x || self.es[e].v.1 == *x);
                    let dummy = usize::try_from(target).ok().and_then(|t| {
                        with.and_then(|e| self.ctrls.get(&e))
                            .and_then(|c| c.get(&t))
                    });
                    if let Some(&d) = dummy {
                        *x = d;
                    }
                }
            }
            out
        };
        let n = computed[side].clone();
        self.vs[v].neighbors = Some(computed);
        n
    }

    /// The layer the current direction reads neighbors from.
    fn prev_layer(&self, r: usize) -> Option<usize> {
        if self.dirv == 1 {
            (r + 1 < self.layers.len()).then_some(r + 1)
        } else {
            r.checked_sub(1)
        }
    }

    /// Inversions among the positions of the layer's neighbors (its crossings).
    fn crossings(&mut self, r: usize) -> usize {
        let mut all = Vec::new();
        for v in self.layers[r].clone() {
            let mut p: Vec<usize> = self
                .neighbors(v, self.dirv)
                .iter()
                .map(|&x| self.vs[x].pos)
                .collect();
            p.sort_unstable();
            all.extend(p);
        }
        let mut seen: Vec<usize> = Vec::new();
        let mut count = 0;
        for (i, p) in all.into_iter().enumerate() {
            let j = seen.partition_point(|&s| s <= p);
            if j < i {
                count += i - j;
            }
            seen.insert(j, p);
        }
        count
    }

    /// Orders layer `r` by its neighbors' barycenters, then one pass of adjacent swaps.
    fn order(&mut self, r: usize) -> usize {
        self.invert();
        let mut c = self.crossings(r);
        if c > 0 {
            let has_prev = self
                .prev_layer(r)
                .is_some_and(|p| !self.layers[p].is_empty());
            for v in self.layers[r].clone() {
                if has_prev {
                    let bars: Vec<f64> = self
                        .neighbors(v, self.dirv)
                        .iter()
                        .map(|&x| self.vs[x].bar)
                        .collect();
                    if !bars.is_empty() {
                        self.vs[v].bar = bars.iter().sum::<f64>() / bars.len() as f64;
                    }
                }
            }
            let mut layer = std::mem::take(&mut self.layers[r]);
            layer.sort_by(|a, b| self.vs[*a].bar.total_cmp(&self.vs[*b].bar));
            self.layers[r] = layer;
            c = self.reduce_crossings(r);
            for (i, v) in self.layers[r].clone().into_iter().enumerate() {
                self.vs[v].pos = i;
                self.vs[v].bar = i as f64 * self.step[r];
            }
        }
        self.invert();
        c
    }

    fn reduce_crossings(&mut self, r: usize) -> usize {
        let n = self.layers[r].len();
        let mut total = 0;
        for i in 0..n.saturating_sub(1) {
            let (vi, vj) = (self.layers[r][i], self.layers[r][i + 1]);
            let bars = |this: &mut Self, v| -> Vec<f64> {
                this.neighbors(v, this.dirv)
                    .iter()
                    .map(|&x| this.vs[x].bar)
                    .collect()
            };
            let ni = bars(self, vi);
            let (mut xij, mut xji) = (0, 0);
            for nj in bars(self, vj) {
                let x = ni.iter().filter(|&&b| b > nj).count();
                xij += x;
                xji += ni.len() - x;
            }
            if xji < xij {
                self.layers[r].swap(i, i + 1);
                total += xji;
            } else {
                total += xij;
            }
        }
        total
    }

    /// Orders every layer top-down; then, if anything crosses and not `oneway`, bottom-up
    /// until an empty layer or the top.
    fn ordering_step(&mut self, oneway: bool) {
        self.dirv = -1;
        let mut crossings = 0;
        for r in 0..self.layers.len() {
            crossings += self.order(r);
        }
        if oneway || crossings == 0 {
            return;
        }
        self.dirv = 1;
        let mut r = self.layers.len().checked_sub(1);
        while let Some(l) = r.filter(|&l| !self.layers[l].is_empty()) {
            self.order(l);
            r = l.checked_sub(1);
        }
    }

    /// Orders the layers and places the vertices.
    pub(super) fn draw(&mut self) {
        self.ordering_step(false);
        self.ordering_step(true);
        self.set_xy();
    }

    /// A vertex's point: its box's center.
    pub(super) fn xy(&self, v: usize) -> (f64, f64) {
        self.vs[v].xy
    }
}

mod place;
mod route;
