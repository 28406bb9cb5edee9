//! The human output: aligned tables, shortened values, colour and progress only on a terminal.

use std::io::{IsTerminal, Write};

/// `rows` under `headers`, each column as wide as its widest cell (counted in characters),
/// two spaces apart; no trailing spaces.
pub(crate) fn render(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            out.push_str(cell);
            if i + 1 < cells.len() {
                // A row with more cells than there are headers leaves the extra ones unpadded.
                let width = widths.get(i).copied().unwrap_or_default();
                let pad = width.saturating_sub(cell.chars().count());
                out.push_str(&" ".repeat(pad));
            }
        }
        out.truncate(out.trim_end().len());
        out
    };
    let mut head = line(headers.iter().map(|h| (*h).to_owned()).collect());
    if colour() {
        head = format!("\x1b[1m{head}\x1b[0m");
    }
    let mut lines = vec![head];
    lines.extend(rows.into_iter().map(line));
    lines.join("\n")
}

/// `text` cut to `max` characters, with `…` when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Whether stdout is a terminal that wants colour (`NO_COLOR` unset).
pub(crate) fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// A one-line progress counter on stderr, shown only when stderr is a terminal.
pub(crate) struct Progress {
    label: &'static str,
    total: usize,
    done: usize,
    shown: bool,
}

impl Progress {
    /// A counter for `total` steps of `label`.
    pub(crate) fn new(label: &'static str, total: usize) -> Self {
        Self {
            label,
            total,
            done: 0,
            shown: std::io::stderr().is_terminal() && total > 1,
        }
    }

    /// One more step done.
    pub(crate) fn tick(&mut self) {
        self.done += 1;
        if self.shown {
            let width = 30;
            let filled = (self.done * width).checked_div(self.total).unwrap_or(width);
            let bar = format!(
                "{}{}",
                "#".repeat(filled),
                "-".repeat(width - filled.min(width))
            );
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{} [{bar}] {}/{}", self.label, self.done, self.total);
            let _ = err.flush();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}

/// A byte count for people: `812 B`, `3.4 KiB`, `12.0 MiB`.
pub(crate) fn bytes(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    #[allow(clippy::cast_precision_loss)]
    let mut v = n as f64 / 1024.0;
    let mut unit = "KiB";
    for larger in ["MiB", "GiB", "TiB"] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = larger;
    }
    format!("{v:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_and_shortens() {
        let t = render(
            &["A", "LONGER"],
            vec![
                vec!["xyz".into(), "1".into()],
                vec!["é".into(), "22".into()],
            ],
        );
        assert_eq!(t, "A    LONGER\nxyz  1\né    22");
        let empty_last = render(&["A", "B"], vec![vec!["x".into(), String::new()]]);
        assert_eq!(empty_last, "A  B\nx");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(3 * 1024 + 410), "3.4 KiB");
        assert_eq!(bytes(12 * 1024 * 1024), "12.0 MiB");
        assert_eq!(bytes(5 << 40), "5.0 TiB");
        assert_eq!(bytes(u64::MAX), "16777216.0 TiB");
    }

    #[test]
    fn rows_wider_than_the_headers_are_kept() {
        let t = render(
            &["A"],
            vec![vec!["x".into(), "extra".into(), "more".into()]],
        );
        assert_eq!(t, "A\nx  extra  more");
    }
}
