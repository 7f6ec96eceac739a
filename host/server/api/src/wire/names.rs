//! The rule for names in both APIs: resource ids, lock ids and client ids
//! are names as every host takes them, `fencing_rules::accept::name` (the
//! rule is written there once, and the shared argument vectors hold every
//! host to it); object paths and an operator's reasons have rules of their
//! own here (paths add segment rules in storage).
//!
//! Invariant: a name that passes is 1..=256 characters (Unicode scalar
//! values, as JSON Schema's `maxLength` counts them, so the published schema
//! and the server agree on every string) with no control character and no
//! leading or trailing whitespace, so the lock API and the storage API accept
//! exactly the same resource names, and no two accepted names differ only in
//! invisible bytes at their ends. A name is at most four bytes a character.
//! A path follows the same text rule up to 1,024 characters.
//!
//! Names are compared as their bytes, in every host: the NFC and NFD forms of
//! one text are two names. Nothing normalizes, because every store under the
//! check (redb keys, PostgreSQL and SQLite text, Redis keys) keys by bytes
//! too; a client that takes names from people normalizes them itself.

/// Longest resource id, lock id or client id, in characters.
pub const MAX_NAME_CHARS: usize = fencing_rules::accept::MAX_NAME_CHARS;
/// Longest object path, in characters.
pub const MAX_PATH_CHARS: usize = 1024;
/// Longest reason an operator gives for a reset, in characters.
pub const MAX_REASON_CHARS: usize = 1024;

/// The control characters (Unicode `Cc`, what `char::is_control` means), as
/// the inside of a regular-expression character class.
macro_rules! controls {
    () => {
        r"\u0000-\u001F\u007F-\u009F"
    };
}

/// The whitespace (Unicode `White_Space`, what `str::trim` removes) that is
/// not a control character, as the inside of a character class.
macro_rules! spaces {
    () => {
        r"\u0020\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
    };
}

/// [`name_problem`]'s and [`path_problem`]'s rule as a regular expression,
/// lengths aside (those are `minLength`/`maxLength`): no control character,
/// and neither the first nor the last character whitespace. Only `\uXXXX`
/// escapes in character classes, which ECMA-262 (JSON Schema's dialect),
/// Python's `re` and Rust's `regex` read alike; the published schema
/// carries it, and a test holds it to both functions.
pub const NAME_PATTERN: &str =
    concat!("^[^", controls!(), spaces!(), "](?:[^", controls!(), "]*[^", controls!(), spaces!(), "])?$");

/// [`reason_problem`]'s rule as a regular expression, lengths aside: no
/// control character, and at least one character that is not whitespace.
pub const REASON_PATTERN: &str = concat!("^[^", controls!(), "]*[^", controls!(), spaces!(), "][^", controls!(), "]*$");

/// Why `value` is not a name (`fencing_rules::accept::name`: the message
/// ends with the refusal's code, as in every host), or `None`.
pub fn name_problem(value: &str) -> Option<String> {
    fencing_rules::accept::name(value).err().map(|e| e.to_string())
}

/// Why `value` is not an acceptable object path's text (1 to
/// [`MAX_PATH_CHARS`] characters, the name rule's text otherwise; storage
/// adds the segment rules), or `None`.
pub fn path_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some("must not be empty".into());
    }
    let chars = value.chars().count();
    if chars > MAX_PATH_CHARS {
        return Some(format!("is {chars} characters, longer than {MAX_PATH_CHARS}"));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Some(format!("contains control character U+{:04X}", c as u32));
    }
    if value.trim() != value {
        return Some("must not begin or end with whitespace".into());
    }
    None
}

/// Why `value` is not an acceptable reason for an operator's reset, or
/// `None`: 1..=[`MAX_REASON_CHARS`] characters, no control character, not
/// only whitespace (inner and surrounding spaces are part of the text).
pub fn reason_problem(value: &str) -> Option<String> {
    let chars = value.chars().count();
    if value.trim().is_empty() || chars > MAX_REASON_CHARS || value.chars().any(char::is_control) {
        return Some(format!("must be 1 to {MAX_REASON_CHARS} characters of text without control characters"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_one_rule() {
        assert_eq!(name_problem("storage:customer-orders-bucket"), None);
        assert_eq!(name_problem("a b"), None, "inner spaces are part of a name");
        for bad in ["", " a", "a ", "\u{a0}a", "a\u{3000}", "a\tb", "a\0b", "a\u{7f}"] {
            assert!(name_problem(bad).is_some(), "{bad:?} should be refused");
        }
        assert!(name_problem(&"x".repeat(257)).is_some_and(|p| p.ends_with("(name_too_long)")));
        assert_eq!(name_problem(&"x".repeat(256)), None);
        // Characters, not bytes: 256 four-byte characters pass, 257 do not.
        assert_eq!(name_problem(&"\u{1F512}".repeat(256)), None);
        assert!(name_problem(&"\u{1F512}".repeat(257)).is_some());
        // A path is the same text up to 1,024 characters.
        assert_eq!(path_problem(&"p".repeat(1024)), None);
        assert!(path_problem(&"p".repeat(1025)).is_some());
        assert!(path_problem("/a\0").is_some() && path_problem(" /a").is_some());
    }

    /// Every string of up to three characters drawn from the edges of the
    /// rule (controls, each kind of whitespace, a BOM, dots, slashes, wide
    /// characters): the pattern and the function agree on every one.
    #[test]
    fn the_patterns_are_the_rules() {
        let name = regex::Regex::new(NAME_PATTERN).unwrap();
        let reason = regex::Regex::new(REASON_PATTERN).unwrap();
        let alphabet = [
            'a',
            ' ',
            '\t',
            '\n',
            '\u{b}',
            '\0',
            '\u{7f}',
            '\u{85}',
            '\u{9f}',
            '\u{a0}',
            '\u{a1}',
            '\u{1680}',
            '\u{200a}',
            '\u{200b}',
            '\u{2028}',
            '\u{202f}',
            '\u{3000}',
            '\u{feff}',
            '.',
            '/',
            'é',
            '\u{1F512}',
        ];
        let mut checked = 0;
        for_each_string(&alphabet, 3, &mut |s| {
            assert_eq!(name.is_match(s), name_problem(s).is_none(), "name {s:?}");
            assert_eq!(name.is_match(s), path_problem(s).is_none(), "path {s:?}");
            assert_eq!(reason.is_match(s), reason_problem(s).is_none(), "reason {s:?}");
            checked += 1;
        });
        assert_eq!(checked, 1 + 22 + 22 * 22 + 22 * 22 * 22);
    }

    /// Calls `f` with every string of at most `len` characters from `alphabet`.
    fn for_each_string(alphabet: &[char], len: usize, f: &mut dyn FnMut(&str)) {
        fn grow(prefix: &mut String, alphabet: &[char], left: usize, f: &mut dyn FnMut(&str)) {
            f(prefix);
            if left == 0 {
                return;
            }
            for &c in alphabet {
                prefix.push(c);
                grow(prefix, alphabet, left - 1, f);
                prefix.pop();
            }
        }
        grow(&mut String::new(), alphabet, len, f);
    }
}
