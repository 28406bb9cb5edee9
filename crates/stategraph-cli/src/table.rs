//! Aligned text tables for the human output.

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
                let pad = widths[i].saturating_sub(cell.chars().count());
                out.push_str(&" ".repeat(pad));
            }
        }
        out
    };
    let mut lines = vec![line(headers.iter().map(|h| (*h).to_owned()).collect())];
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
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
    }
}
