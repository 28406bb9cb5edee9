//! Edge routes as grandalf's `route_with_lines` draws them: straight lines through the
//! dummies, clipped at the two boxes' borders.

#![allow(clippy::indexing_slicing)] // the layout's own arena indices, as in `sugiyama`

use super::{Layout, Vertex};

impl Layout {
    /// An edge's points, from its tail's box border, through its dummies, to its head's box
    /// border; `None` when an end is inside the other's box.
    pub(in crate::topology) fn route(&self, e: usize) -> Option<Vec<(f64, f64)>> {
        let (a, b) = self.es[e].v;
        let mut pts = vec![self.vs[a].xy];
        if let Some(ctrl) = self.ctrls.get(&e) {
            let (r0, r1) = (self.vs[a].rank, self.vs[b].rank);
            if r0 < r1 {
                pts.extend((r0 + 1..r1).map(|r| self.vs[ctrl[&r]].xy));
            } else {
                pts.extend((r1 + 1..r0).rev().map(|r| self.vs[ctrl[&r]].xy));
            }
        }
        pts.push(self.vs[b].xy);
        let n = pts.len();
        let tail = border(&self.vs[a], pts[1])?;
        let head = border(&self.vs[b], pts[n - 2])?;
        pts[0] = tail;
        pts[n - 1] = head;
        Some(pts)
    }
}

/// Where the line from `view`'s center to `to` leaves its box (grandalf's `intersectR`): the
/// first of the top, right, bottom and left sides it crosses.
fn border(view: &Vertex, to: (f64, f64)) -> Option<(f64, f64)> {
    let (bx, by) = (to.0 - view.xy.0, to.1 - view.xy.1);
    let bbx2 = (view.w / 2.0).floor();
    let bby2 = (view.h / 2.0).floor();
    let (bbx1, bby1) = (-bbx2, -bby2);
    let sides = [
        ((bbx1, bby1), (bbx2, bby1)),
        ((bbx2, bby1), (bbx2, bby2)),
        ((bbx1, bby2), (bbx2, bby2)),
        ((bbx1, bby2), (bbx1, bby1)),
    ];
    sides.into_iter().find_map(|(p3, p4)| {
        let (dx, dy) = (p4.0 - p3.0, p4.1 - p3.1);
        let det = bx * dy - by * dx;
        if det == 0.0 {
            return None;
        }
        let (cx, cy) = p3;
        let t = (cx * by - cy * bx) / det;
        if !(0.0..=1.0).contains(&t) {
            return None;
        }
        let t = (cx * dy - cy * dx) / det;
        if !(0.0..=1.0).contains(&t) {
            return None;
        }
        Some((t * bx + view.xy.0, t * by + view.xy.1))
    })
}
