//! Reading a command's arguments: u64 tokens and sequences as every host
//! reads them (decimal, 0 to 2^64-1, nothing else), lock names as the
//! contract's strings (UTF-8), and the options a fenced write takes.

use fencing_runtime::Policy;
use redis_module::{RedisError, RedisString};

/// The options after a fenced write's fixed arguments: `SEQ n`, `POLICY p`, `PROOF hex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    pub sequence: Option<u64>,
    pub policy: Policy,
    /// The grant's proof (signed tokens: the module's `VERIFY` keys check it).
    pub proof: Option<Vec<u8>>,
}

/// An error reply naming the argument: `ERR <what> ...`.
pub fn invalid(what: &str, problem: &str) -> RedisError {
    RedisError::String(format!("ERR {what} {problem}"))
}

/// A u64 in decimal: no sign, no spaces, at most 2^64-1.
pub fn u64_arg(arg: &RedisString, what: &str) -> Result<u64, RedisError> {
    let bytes = arg.as_slice();
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(invalid(what, "must be a decimal integer from 0 to 18446744073709551615"));
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| invalid(what, "is above 18446744073709551615 (tokens are u64)"))
}

/// A lock name: 1 to 256 characters of UTF-8.
pub fn lock_arg(arg: &RedisString) -> Result<String, RedisError> {
    let name = std::str::from_utf8(arg.as_slice()).map_err(|_| invalid("lock", "is not UTF-8"))?;
    let chars = name.chars().count();
    if chars == 0 || chars > 256 {
        return Err(invalid("lock", "must be 1 to 256 characters"));
    }
    Ok(name.to_owned())
}

/// Any lock name the contract takes (UTF-8, no length rule of the module's;
/// `FENCING.DECIDE` checks decisions, it stores nothing).
pub fn any_lock_arg(arg: &RedisString) -> Result<String, RedisError> {
    std::str::from_utf8(arg.as_slice()).map(str::to_owned).map_err(|_| invalid("lock", "is not UTF-8"))
}

/// A policy's name.
pub fn policy_arg(arg: &RedisString) -> Result<Policy, RedisError> {
    match arg.as_slice().to_ascii_lowercase().as_slice() {
        b"non-decreasing" | b"non_decreasing" => Ok(Policy::NonDecreasing),
        b"strictly-increasing" | b"strictly_increasing" => Ok(Policy::StrictlyIncreasing),
        _ => Err(invalid("POLICY", "must be non-decreasing or strictly-increasing")),
    }
}

/// A `PROOF` argument: the grant's proof in hex (`fencing_runtime::accept::proof`).
pub fn proof_arg(value: &RedisString) -> Result<Vec<u8>, RedisError> {
    fencing_runtime::accept::proof(value.as_slice()).map_err(|e| invalid("PROOF", &e.to_string()))
}

/// Reads `SEQ n` and `POLICY p` from the front of `args`; the rest is returned.
pub fn write_options(args: &[RedisString]) -> Result<(WriteOptions, &[RedisString]), RedisError> {
    let mut options = WriteOptions { sequence: None, policy: Policy::NonDecreasing, proof: None };
    let mut rest = args;
    loop {
        match rest {
            [word, value, tail @ ..] if word.as_slice().eq_ignore_ascii_case(b"SEQ") => {
                if options.sequence.is_some() {
                    return Err(invalid("SEQ", "is given twice"));
                }
                options.sequence = Some(u64_arg(value, "SEQ")?);
                rest = tail;
            }
            [word, value, tail @ ..] if word.as_slice().eq_ignore_ascii_case(b"POLICY") => {
                options.policy = policy_arg(value)?;
                rest = tail;
            }
            [word, value, tail @ ..] if word.as_slice().eq_ignore_ascii_case(b"PROOF") => {
                if options.proof.is_some() {
                    return Err(invalid("PROOF", "is given twice"));
                }
                options.proof = Some(proof_arg(value)?);
                rest = tail;
            }
            [word]
                if word.as_slice().eq_ignore_ascii_case(b"SEQ")
                    || word.as_slice().eq_ignore_ascii_case(b"POLICY")
                    || word.as_slice().eq_ignore_ascii_case(b"PROOF") =>
            {
                return Err(invalid(&String::from_utf8_lossy(word.as_slice()).to_uppercase(), "needs a value"));
            }
            _ => return Ok((options, rest)),
        }
    }
}
