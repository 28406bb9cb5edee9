//! Unit tests of the store's SQL building blocks.

use stategraph_store::MatchType;

use super::sql::{escape_like, escape_regex, match_regex, namespace_of};
use super::write::vector_literal;

#[test]
fn patterns() {
    assert_eq!(escape_like(r"a_b%c\d"), r"a\_b\%c\\d");
    let path = vec!["users".to_owned(), "*".to_owned(), "a-b".to_owned()];
    assert_eq!(
        match_regex(&path, MatchType::Prefix),
        r"^users\.[^.]+\.a\-b(\.|$)"
    );
    assert_eq!(match_regex(&path[2..], MatchType::Suffix), r"(^|\.)a\-b$");
    assert_eq!(escape_regex("ü(x)"), r"ü\(x\)");
    assert_eq!(vector_literal(&[0.5, -1.0, 1e-7]), "[0.5,-1,0.0000001]");
    assert_eq!(namespace_of("a.b"), vec!["a".to_owned(), "b".to_owned()]);
}
