//! Operators' credentials: the tokens `--admin-token-file` names, one per
//! operator, that the operator routes (`/v1/admin/...`) need.
//!
//! File format: one operator a line, `<name> <token>`; blank lines and
//! lines starting with `#` are ignored. A name is 1 to 64 of
//! `A-Z a-z 0-9 . _ @ -`; a token is printable ASCII without spaces, at
//! least [`MIN_TOKEN_CHARS`](crate::secrets::MIN_TOKEN_CHARS) long.
//!
//! Invariants:
//! - operator routes are off unless the file is given: without it they
//!   answer 403 `admin_disabled`, whatever the request carries;
//! - an operator's token is never a writer's: the server refuses to start
//!   when a token in the file is the `--auth-token-file` token, and a
//!   writer's token on an operator route is refused (403 `operator_only`),
//!   so a writer paused past its lease cannot reset the fence that refuses
//!   it;
//! - tokens and names are distinct, and a presented token is compared with
//!   every operator's in time that depends only on the tokens configured
//!   (`secrets::constant_time_eq`), so which prefix of which token a guess
//!   matches cannot be timed;
//! - the request that passes carries [`Operator`] (the name), which the
//!   handler records with everything it does (`audit.rs`).

use crate::secrets::{SecretFileError, check_private, check_token_length, constant_time_eq};
use std::path::Path;
use std::sync::Arc;

/// The operator who presented a valid token: a request extension the
/// operator routes read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    pub name: String,
}

/// The operators a server knows.
#[derive(Clone)]
pub struct Operators {
    entries: Arc<[(String, Box<[u8]>)]>,
}

impl Operators {
    /// Reads `--admin-token-file`: private (0600), each line a distinct
    /// operator with a long enough token of its own. `writer_token` (the
    /// `--auth-token-file` token, if any) must not be among them.
    pub fn load(path: &Path, writer_token: Option<&str>) -> Result<Operators, SecretFileError> {
        check_private(path, "operators' tokens")?;
        let text =
            std::fs::read_to_string(path).map_err(|e| SecretFileError::new(path, format!("cannot read: {e}")))?;
        let operators = Operators::parse(path, &text)?;
        if let Some(writer) = writer_token
            && operators.entries.iter().any(|(_, t)| t.as_ref() == writer.as_bytes())
        {
            return Err(SecretFileError::new(
                path,
                "an operator's token is the writers' token (--auth-token-file): give each operator a token of \
                 their own that no writer holds",
            ));
        }
        Ok(operators)
    }

    /// Parses the file's text (see the module docs).
    pub fn parse(path: &Path, text: &str) -> Result<Operators, SecretFileError> {
        let mut entries: Vec<(String, Box<[u8]>)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |problem: String| SecretFileError::new(path, format!("line {}: {problem}", i + 1));
            let mut fields = line.split(' ');
            let (Some(name), Some(token), None) = (fields.next(), fields.next(), fields.next()) else {
                return Err(at("expected `<operator name> <token>`, one space between".into()));
            };
            if !valid_name(name) {
                return Err(at(format!("operator name {name:?} must be 1 to 64 of A-Z a-z 0-9 . _ @ -")));
            }
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(at("a token is printable ASCII without spaces".into()));
            }
            check_token_length(path, token).map_err(|e| at(e.problem))?;
            if entries.iter().any(|(n, _)| n == name) {
                return Err(at(format!("operator {name:?} is named twice")));
            }
            if entries.iter().any(|(_, t)| t.as_ref() == token.as_bytes()) {
                return Err(at("two operators share one token: each needs their own".into()));
            }
            entries.push((name.to_owned(), token.as_bytes().into()));
        }
        if entries.is_empty() {
            return Err(SecretFileError::new(path, "names no operator (lines `<operator name> <token>`)"));
        }
        Ok(Operators { entries: entries.into() })
    }

    /// The operator whose token `presented` is, if any. Every configured
    /// token is compared, whichever matches.
    pub fn who(&self, presented: &[u8]) -> Option<Operator> {
        let mut found = None;
        for (name, token) in self.entries.iter() {
            if constant_time_eq(presented, token) {
                found = Some(name);
            }
        }
        found.map(|name| Operator { name: name.clone() })
    }

    /// How many operators the file names.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Never true: a file that names no operator is refused.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b))
}

/// The token of an operator's own file for a client (`fencing admin
/// reset-fence --admin-token-file`): one line, `<name> <token>` as the
/// server's file has it, or the token alone.
pub fn client_token(path: &Path) -> Result<String, SecretFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| SecretFileError::new(path, format!("cannot read: {e}")))?;
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    let [line] = lines[..] else {
        return Err(SecretFileError::new(path, "must hold one line: `<operator name> <token>` or the token alone"));
    };
    let token = line.rsplit(' ').next().unwrap_or(line);
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(SecretFileError::new(path, "the token must be printable ASCII without spaces"));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123";
    const B: &str = "fedcba9876543210fedc";

    fn parse(text: &str) -> Result<Operators, String> {
        Operators::parse(Path::new("ops"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn each_operator_has_a_name_and_a_token_of_their_own() {
        let ops = parse(&format!("# operators\nalice {A}\n\nbob.ops {B}\r\n")).unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops.who(A.as_bytes()), Some(Operator { name: "alice".into() }));
        assert_eq!(ops.who(B.as_bytes()).map(|o| o.name), Some("bob.ops".into()));
        assert_eq!(ops.who(&A.as_bytes()[..19]), None, "a prefix is not the token");
        assert_eq!(ops.who(b""), None);
    }

    #[test]
    fn bad_files_are_named_with_their_line() {
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "names no operator"),
            (A.into(), "line 1: expected"),
            (format!("alice  {A}"), "line 1: expected"),
            (format!("al ice {A}"), "line 1: expected"),
            (format!("al/ice {A}"), "must be 1 to 64"),
            ("alice short".into(), "line 1: the token is 5 characters"),
            (format!("alice {A}\nalice {B}"), "line 2: operator \"alice\" is named twice"),
            (format!("alice {A}\nbob {A}"), "line 2: two operators share one token"),
        ];
        for (text, problem) in &cases {
            let e = parse(text).err().unwrap_or_default();
            assert!(e.contains(problem), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_writers_token_is_no_operators_and_the_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("operators");
        std::fs::write(&path, format!("alice {A}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(Operators::load(&path, None).err().unwrap().problem.contains("chmod 600"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Operators::load(&path, Some(B)).is_ok());
        assert!(Operators::load(&path, Some(A)).err().unwrap().problem.contains("the writers' token"));
        assert_eq!(client_token(&path).unwrap(), A);
        std::fs::write(&path, format!("{B}\n")).unwrap();
        assert_eq!(client_token(&path).unwrap(), B);
        std::fs::write(&path, format!("alice {A}\nbob {B}\n")).unwrap();
        assert!(client_token(&path).is_err(), "a client sends one operator's token");
    }
}
