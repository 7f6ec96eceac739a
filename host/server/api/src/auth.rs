//! The bearer token a client or server reads from a file
//! (`--auth-token-file`): one token of printable ASCII, nothing else.

use std::path::{Path, PathBuf};

/// Why a token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read auth token file {path}: {source}")]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("auth token file {path} is empty")]
    Empty { path: PathBuf },
    #[error("auth token file {path} must hold one token of printable ASCII without spaces")]
    Invalid { path: PathBuf },
}

/// Reads a token file: one token, a trailing newline (`\n` or `\r\n`) ignored.
pub fn read_token_file(path: &Path) -> Result<String, TokenFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| TokenFileError::Unreadable { path: path.to_path_buf(), source })?;
    let token = text.strip_suffix('\n').unwrap_or(&text);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if token.is_empty() {
        return Err(TokenFileError::Empty { path: path.to_path_buf() });
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenFileError::Invalid { path: path.to_path_buf() });
    }
    Ok(token.to_owned())
}
