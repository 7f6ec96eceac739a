//! The one rule for names in both APIs: resource ids, lock ids, client ids
//! and object paths (which add their own segment rules in storage).
//!
//! Invariant: a name that passes is 1..=limit characters (Unicode scalar
//! values, as JSON Schema's `maxLength` counts them, so the published schema
//! and the server agree on every string) with no control character and no
//! leading or trailing whitespace, so the lock API and the storage API accept
//! exactly the same resource names, and no two accepted names differ only in
//! invisible bytes at their ends. A name is at most four bytes a character.
//!
//! Names are compared as their bytes, in every host: the NFC and NFD forms of
//! one text are two names. Nothing normalizes, because every store under the
//! check (redb keys, PostgreSQL and SQLite text, Redis keys) keys by bytes
//! too; a client that takes names from people normalizes them itself.

/// Longest resource id, lock id or client id, in characters.
pub const MAX_NAME_CHARS: usize = 256;
/// Longest object path, in characters.
pub const MAX_PATH_CHARS: usize = 1024;
/// Longest reason an operator gives for a reset, in characters.
pub const MAX_REASON_CHARS: usize = 1024;

/// Why `value` is not an acceptable name of at most `limit` characters, or `None`.
pub fn name_problem(value: &str, limit: usize) -> Option<String> {
    if value.is_empty() {
        return Some("must not be empty".into());
    }
    let chars = value.chars().count();
    if chars > limit {
        return Some(format!("is {chars} characters, longer than {limit}"));
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
        // Characters, not bytes: 256 four-byte characters pass, 257 do not.
        assert_eq!(name_problem(&"\u{1F512}".repeat(256), 256), None);
        assert!(name_problem(&"\u{1F512}".repeat(257), 256).is_some());
    }
}
