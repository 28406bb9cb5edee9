//! Coordinates (Brandes–Köpf, as grandalf computes them): alignment conflicts with inner
//! segments, then for each of the four directions vertical alignment to median neighbors
//! and horizontal compaction of the aligned blocks; a vertex's x is the average of its two
//! middle candidates, its y its layer's.

#![allow(clippy::indexing_slicing)] // the layout's own arena indices, as in `sugiyama`

use super::Layout;

impl Layout {
    /// Sets `dirh`/`dirv` from grandalf's `dirvh` (0..4).
    fn set_dirvh(&mut self, dirvh: usize) {
        (self.dirh, self.dirv) = match dirvh {
            0 => (1, -1),
            1 => (-1, -1),
            2 => (1, 1),
            _ => (-1, 1),
        };
    }

    fn dirvh(&self) -> usize {
        usize::try_from((self.dirv + 1) + (1 - self.dirh) / 2).unwrap_or(0)
    }

    pub(super) fn set_xy(&mut self) {
        self.invert();
        self.detect_conflicts();
        self.unblock();
        for layer in &self.layers {
            for &v in layer {
                self.vs[v].x = [0.0; 4];
            }
        }
        let saved = self.dirvh();
        for dirvh in 0..4 {
            self.set_dirvh(dirvh);
            self.align_vertically();
            self.compact_horizontally();
        }
        self.set_dirvh(saved);
        let mut y = 0.0;
        for layer in &self.layers {
            let dy = layer
                .iter()
                .map(|&v| self.vs[v].h / 2.0)
                .fold(f64::NEG_INFINITY, f64::max);
            for &v in layer {
                let mut xs = self.vs[v].x;
                xs.sort_by(f64::total_cmp);
                self.vs[v].xy = ((xs[1] + xs[2]) / 2.0, y + dy);
            }
            y += 2.0 * dy + self.yspace;
        }
        self.invert();
    }

    /// Marks the edges that cross an inner segment (between two dummies) as not to be
    /// aligned.
    fn detect_conflicts(&mut self) {
        let saved = self.dirvh();
        self.set_dirvh(0);
        self.conflicts.clear();
        for r in 0..self.layers.len() {
            let Some(prev) = self.prev_layer(r).filter(|&p| !self.layers[p].is_empty()) else {
                continue;
            };
            let layer = self.layers[r].clone();
            let last = layer.len().saturating_sub(1);
            let (mut k0, k1_init, mut l) = (0, self.layers[prev].len().saturating_sub(1), 0);
            for (l1, &v) in layer.iter().enumerate() {
                if self.vs[v].dummy_of.is_none() {
                    continue;
                }
                let up = self.neighbors(v, -1);
                let inner = up.first().is_some_and(|&u| self.vs[u].dummy_of.is_some());
                if l1 == last || inner {
                    let mut k1 = k1_init;
                    if inner && let Some(&u) = up.last() {
                        k1 = self.vs[u].pos;
                    }
                    for &vl in layer.get(l..=l1).unwrap_or_default() {
                        for vk in self.neighbors(vl, self.dirv) {
                            let k = self.vs[vk].pos;
                            if k < k0 || k > k1 {
                                self.conflicts.push((vk, vl));
                            }
                        }
                    }
                    l = l1 + 1;
                    k0 = k1;
                }
            }
        }
        self.set_dirvh(saved);
    }

    /// The positions of `v`'s median neighbors (one, or two for an even count).
    fn median_positions(&mut self, v: usize) -> Vec<usize> {
        let mut pos: Vec<usize> = self
            .neighbors(v, self.dirv)
            .iter()
            .map(|&x| self.vs[x].pos)
            .collect();
        if pos.is_empty() {
            return pos;
        }
        pos.sort_unstable();
        if self.dirh == -1 {
            pos.reverse();
        }
        let (i, j) = ((pos.len() - 1) / 2, (pos.len() - 1) % 2);
        if j == 0 {
            vec![pos[i]]
        } else {
            vec![pos[i], pos[i + j]]
        }
    }

    /// Layers in the order the current direction walks them.
    fn walk(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.layers.len()).collect();
        if self.dirv == 1 {
            order.reverse();
        }
        order
    }

    /// A layer's vertices in the current horizontal direction.
    fn across(&self, r: usize) -> Vec<usize> {
        let mut layer = self.layers[r].clone();
        if self.dirh == -1 {
            layer.reverse();
        }
        layer
    }

    fn align_vertically(&mut self) {
        for r in self.walk() {
            let Some(prev) = self.prev_layer(r).filter(|&p| !self.layers[p].is_empty()) else {
                continue;
            };
            let mut last: Option<usize> = None;
            for vk in self.across(r) {
                for m in self.median_positions(vk) {
                    let um = self.layers[prev][m];
                    if self.vs[vk].align == vk {
                        let pair = if self.dirv == 1 { (vk, um) } else { (um, vk) };
                        let after = last.is_none_or(|r| {
                            self.dirh * i64::try_from(r).unwrap_or(0)
                                < self.dirh * i64::try_from(m).unwrap_or(0)
                        });
                        if !self.conflicts.contains(&pair) && after {
                            self.vs[um].align = vk;
                            self.vs[vk].root = self.vs[um].root;
                            self.vs[vk].align = self.vs[vk].root;
                            last = Some(m);
                        }
                    }
                }
            }
        }
    }

    fn compact_horizontally(&mut self) {
        let walk = self.walk();
        for &r in &walk {
            for v in self.across(r) {
                if self.vs[v].root == v {
                    self.place_block(v);
                }
            }
        }
        if self.dirh == -1 {
            for &r in &walk {
                for v in self.layers[r].clone() {
                    if let Some(x) = self.vs[v].placed
                        && x != 0.0
                    {
                        self.vs[v].placed = Some(-x);
                    }
                }
            }
        }
        let d = self.dirvh();
        for &r in &walk {
            for v in self.across(r) {
                let root = self.vs[v].root;
                let mut x = self.vs[root].placed.unwrap_or(0.0);
                let shift = self.vs[self.vs[root].sink].shift;
                if shift < f64::INFINITY {
                    x += self.dirh as f64 * shift;
                }
                self.vs[v].x[d] = x;
            }
        }
        self.unblock();
    }

    /// Every vertex a block of its own, unplaced.
    fn unblock(&mut self) {
        for layer in &self.layers {
            for &v in layer {
                let vx = &mut self.vs[v];
                vx.root = v;
                vx.align = v;
                vx.sink = v;
                vx.shift = f64::INFINITY;
                vx.placed = None;
            }
        }
    }

    fn place_block(&mut self, v: usize) {
        if self.vs[v].placed.is_some() {
            return;
        }
        self.vs[v].placed = Some(0.0);
        let mut w = v;
        loop {
            let j = self.vs[w].pos as i64 - self.dirh;
            let r = self.vs[w].rank;
            if let Some(&wprec) = usize::try_from(j).ok().and_then(|j| self.layers[r].get(j)) {
                let delta = self.xspace + (self.vs[wprec].w + self.vs[w].w) / 2.0;
                let u = self.vs[wprec].root;
                self.place_block(u);
                if self.vs[v].sink == v {
                    self.vs[v].sink = self.vs[u].sink;
                }
                let (xv, xu) = (
                    self.vs[v].placed.unwrap_or(0.0),
                    self.vs[u].placed.unwrap_or(0.0),
                );
                if self.vs[v].sink != self.vs[u].sink {
                    let s = self.vs[u].sink;
                    self.vs[s].shift = self.vs[s].shift.min(xv - (xu + delta));
                } else {
                    self.vs[v].placed = Some(xv.max(xu + delta));
                }
            }
            w = self.vs[w].align;
            if w == v {
                break;
            }
        }
    }
}
