//! Keys and proofs as text, read the same way by every host: hex (two
//! digits a byte, either case) and a key as its three fields
//! `<id> <algorithm> <hex>`, the form of the reference server's key files,
//! the Redis module's `VERIFY`/`SIGN` arguments, PostgreSQL's
//! `fencing.verify_keys` and SQLite's `fencing_set_keys`.
//!
//! A list of keys ([`parse_keys`]) is one key per line, or several on a line
//! separated by commas (a PostgreSQL setting is one line); blank lines and
//! lines starting with `#` are skipped.

use crate::proof::{Algorithm, VerifierKey};

/// A key's fields as read: its id, algorithm and bytes.
pub type KeyFields = (u32, Algorithm, Vec<u8>);

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// The bytes of `text`, two hex digits each (either case); `None` for
/// anything else, an odd length included ([`crate::accept::unhex`]).
pub fn unhex(text: impl AsRef<[u8]>) -> Option<Vec<u8>> {
    crate::accept::unhex(text.as_ref())
}

/// An algorithm by its name in key files (`ed25519`, `hmac-sha256`).
pub fn algorithm(name: &str) -> Result<Algorithm, String> {
    [Algorithm::Ed25519, Algorithm::HmacSha256]
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| format!("algorithm {name:?} is not ed25519 or hmac-sha256"))
}

/// One key from its three fields: a decimal id (u32), an algorithm name and
/// the key's bytes in hex. The bytes are not checked against the algorithm
/// here: [`crate::Verifier::new`] and [`crate::proof::Signer::new`] do that.
pub fn key(id: &str, algorithm: &str, hex: &str) -> Result<KeyFields, String> {
    let id: u32 = id.parse().map_err(|_| format!("key id {id:?} is not a number from 0 to 4294967295"))?;
    let algorithm = self::algorithm(algorithm).map_err(|e| format!("key {id}: {e}"))?;
    let bytes = unhex(hex).ok_or_else(|| format!("key {id}: the key is not hex digits, two per byte"))?;
    Ok((id, algorithm, bytes))
}

/// Every key of `text` with the line it is on (1-based); an error names the
/// line. Empty text is no keys.
pub fn parse_keys(text: &str) -> Result<Vec<(usize, KeyFields)>, (usize, String)> {
    let mut keys = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        for entry in line.split(',').map(str::trim) {
            let fields: Vec<&str> = entry.split_whitespace().collect();
            let [id, algorithm, hex] = fields[..] else {
                return Err((i + 1, format!("expected `<id> <algorithm> <hex>`, found {} fields", fields.len())));
            };
            keys.push((i + 1, key(id, algorithm, hex).map_err(|e| (i + 1, e))?));
        }
    }
    Ok(keys)
}

/// The verifier keys of `text` ([`parse_keys`]), not yet checked as a set.
pub fn parse_verifier_keys(text: &str) -> Result<Vec<VerifierKey>, (usize, String)> {
    Ok(parse_keys(text)?
        .into_iter()
        .map(|(_, (id, algorithm, material))| VerifierKey { id, algorithm, material })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_goes_both_ways_and_refuses_what_is_not_hex() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(hex(&bytes)), Some(bytes));
        assert_eq!(unhex("0aFf"), Some(vec![10, 255]));
        for bad in ["0", "0g", "+1", " 01", "é0"] {
            assert_eq!(unhex(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn keys_are_read_by_line_or_comma_and_errors_name_the_line() {
        let text = "# keygen\n\n1 ed25519 00ff, 2 hmac-sha256 0A\n3 ed25519 01\n";
        let keys = parse_keys(text).unwrap();
        let ids: Vec<(usize, u32)> = keys.iter().map(|(line, (id, ..))| (*line, *id)).collect();
        assert_eq!(ids, [(3, 1), (3, 2), (4, 3)]);
        assert_eq!(keys[1].1.1, Algorithm::HmacSha256);
        assert_eq!(keys[1].1.2, [10]);
        assert_eq!(parse_keys("1 ed25519 00\n2 rsa 00").unwrap_err().0, 2);
        assert!(parse_keys("1 ed25519").unwrap_err().1.contains("found 2 fields"));
        assert!(parse_keys("x ed25519 00").unwrap_err().1.contains("not a number"));
        assert!(parse_keys("1 ed25519 zz").unwrap_err().1.contains("not hex"));
        assert_eq!(parse_keys("").unwrap().len(), 0);
    }
}
