//! The one rule for names in both APIs: resource ids, lock ids, client ids
//! and object paths (which add their own segment rules in storage).
//!
//! Invariant: a name that passes is 1..=limit bytes of UTF-8 with no control
//! character and no leading or trailing whitespace, so the lock API and the
//! storage API accept exactly the same resource names, and no two accepted
//! names differ only in invisible bytes at their ends.

/// Why `value` is not an acceptable name of at most `limit` bytes, or `None`.
pub fn name_problem(value: &str, limit: usize) -> Option<String> {
    if value.is_empty() {
        return Some("must not be empty".into());
    }
    if value.len() > limit {
        return Some(format!("is {} bytes, longer than {limit}", value.len()));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Some(format!("contains control character U+{:04X}", c as u32));
    }
    if value.trim() != value {
        return Some("must not begin or end with whitespace".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_one_rule() {
        assert_eq!(name_problem("storage:customer-orders-bucket", 256), None);
        assert_eq!(name_problem("a b", 256), None, "inner spaces are part of a name");
        for bad in ["", " a", "a ", "\u{a0}a", "a\u{3000}", "a\tb", "a\0b", "a\u{7f}"] {
            assert!(name_problem(bad, 256).is_some(), "{bad:?} should be refused");
        }
        assert!(name_problem(&"x".repeat(257), 256).is_some());
        assert_eq!(name_problem(&"x".repeat(256), 256), None);
    }
}
