//! Name and size validation for resources, locks and object paths, and the
//! one place a write becomes a [`ValidWrite`].
//!
//! Invariant: a name that passes is non-empty, within its character limit, valid
//! UTF-8 without control characters, and (for paths) has no `.`/`..` segment,
//! so no stored key can be confused with another or escape its resource.

use super::{StorageError, WriteRequest};

use fencing_api::wire::names::{MAX_NAME_CHARS, MAX_PATH_CHARS};

/// Longest resource id, in characters.
pub const MAX_RESOURCE_ID_CHARS: usize = MAX_NAME_CHARS;
/// Longest lock id, in characters.
pub const MAX_LOCK_ID_CHARS: usize = MAX_NAME_CHARS;
/// Longest object path, in characters.
pub const MAX_FILE_PATH_CHARS: usize = MAX_PATH_CHARS;
/// Largest object (after an `APPEND`), in bytes.
pub const MAX_OBJECT_BYTES: usize = 64 << 20;

impl WriteRequest {
    /// Checks names and sizes once; the error names the offending field
    /// (`resource_id`, `lock_id`, `file_path`).
    pub fn validate(self) -> Result<ValidWrite, StorageError> {
        validate_resource_id(&self.resource_id)?;
        validate_lock_id(&self.lock_id)?;
        validate_file_path(&self.file_path)?;
        if self.bytes.len() > MAX_OBJECT_BYTES {
            return Err(StorageError::TooLarge { size: self.bytes.len(), limit: MAX_OBJECT_BYTES });
        }
        Ok(ValidWrite(self))
    }
}

/// A [`WriteRequest`] whose names and sizes passed [`WriteRequest::validate`]:
/// the only form an [`Engine`](super::Engine) accepts, so no engine validates a write again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidWrite(WriteRequest);

impl std::ops::Deref for ValidWrite {
    type Target = WriteRequest;

    fn deref(&self) -> &WriteRequest {
        &self.0
    }
}

fn invalid(field: &'static str, message: impl Into<String>) -> StorageError {
    StorageError::InvalidField { field, message: message.into() }
}

fn check_name(field: &'static str, value: &str) -> Result<(), StorageError> {
    match fencing_api::wire::names::name_problem(value) {
        Some(problem) => Err(invalid(field, problem)),
        None => Ok(()),
    }
}

/// A resource id: 1..=256 characters, no control characters, no surrounding whitespace.
pub fn validate_resource_id(value: &str) -> Result<(), StorageError> {
    check_name("resource_id", value)
}

/// A lock id: the same rules as a resource id.
pub fn validate_lock_id(value: &str) -> Result<(), StorageError> {
    check_name("lock_id", value)
}

/// What a segment cannot hold: `/`, backslash, control characters.
macro_rules! barred {
    () => {
        r"/\\\u0000-\u001F\u007F-\u009F"
    };
}

/// One segment: a character that is not a dot, or a dot and then one, or two
/// dots and then anything, so never empty, `.` or `..`.
macro_rules! segment {
    () => {
        concat!(
            r"(?:[^.",
            barred!(),
            "][^",
            barred!(),
            r"]*|\.(?:[^.",
            barred!(),
            "][^",
            barred!(),
            r"]*|\.[^",
            barred!(),
            "]+))"
        )
    };
}

/// [`validate_file_path`]'s segment rule as a regular expression (the name
/// rule, `fencing_api::wire::names::NAME_PATTERN`, applies as well): an
/// optional leading `/`, then segments of anything but `/`, backslash and
/// control characters, none empty, `.` or `..`. The published schema carries
/// both patterns; a test holds them to the function.
pub const PATH_SEGMENTS_PATTERN: &str = concat!(r"^/?", segment!(), r"(?:/", segment!(), r")*$");

/// An object path: 1..=1024 characters, no control characters (NUL included), no
/// backslash, no empty, `.` or `..` segment except a single leading `/`.
pub fn validate_file_path(value: &str) -> Result<(), StorageError> {
    const FIELD: &str = "file_path";
    if let Some(problem) = fencing_api::wire::names::path_problem(value) {
        return Err(invalid(FIELD, problem));
    }
    if value.contains('\\') {
        return Err(invalid(FIELD, "must not contain a backslash"));
    }
    let rel = value.strip_prefix('/').unwrap_or(value);
    for segment in rel.split('/') {
        match segment {
            "" => return Err(invalid(FIELD, "must not contain an empty segment (`//` or a trailing `/`)")),
            "." | ".." => return Err(invalid(FIELD, "must not contain `.` or `..` segments")),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_write_apis_names() {
        validate_resource_id("storage:customer-orders-bucket").unwrap();
        validate_file_path("/uploads/orders-2026-05.csv").unwrap();
        validate_file_path("relative/name.txt").unwrap();
    }

    #[test]
    fn rejects_bad_paths() {
        for bad in ["", "/", "a//b", "/a/../b", "..", "./x", "a\0b", "a\\b", "a/", " a", "a\nb"] {
            assert!(validate_file_path(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(validate_file_path(&"x".repeat(MAX_FILE_PATH_CHARS + 1)).is_err());
    }

    /// Every string of up to five characters from the rule's edges: a path
    /// passes exactly when it matches both published patterns.
    #[test]
    fn the_published_patterns_are_the_path_rule() {
        let name = regex::Regex::new(fencing_api::wire::names::NAME_PATTERN).unwrap();
        let segments = regex::Regex::new(PATH_SEGMENTS_PATTERN).unwrap();
        let alphabet = ['a', '.', '/', '\\', ' ', '\0', '\u{85}', '\u{3000}', 'é'];
        let mut strings = vec![String::new()];
        let mut checked = 0;
        for _ in 0..5 {
            strings = strings.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            for path in &strings {
                let matched = name.is_match(path) && segments.is_match(path);
                assert_eq!(matched, validate_file_path(path).is_ok(), "{path:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 9 + 81 + 729 + 6561 + 59049);
    }

    #[test]
    fn rejects_bad_ids() {
        assert!(validate_resource_id("").is_err());
        assert!(validate_resource_id(&"r".repeat(MAX_RESOURCE_ID_CHARS + 1)).is_err());
        assert!(validate_lock_id("l\u{7f}").is_err());
        validate_lock_id(&"l".repeat(MAX_LOCK_ID_CHARS)).unwrap();
    }
}
