//! Reading a command's arguments by the rules every host follows
//! (`fencing_runtime::accept`): lock names and holder ids are names (1 to
//! 256 characters of UTF-8, no control character, no whitespace at either
//! end), a policy is spelled as in the contract, a token or sequence is its
//! canonical decimal text, a proof is bounded hex. A refusal is
//! `ERR <argument> <what is wrong> (<rule's code>)`, for example
//! `ERR lock contains control character U+0000 (name_control)`.
//!
//! Keys are Redis's own and stay binary-safe: any bytes, a NUL or a byte
//! that is not UTF-8 included (a raw UUID is an honest key); the module
//! keeps them as bytes and never turns one into text except, escaped, in a
//! log line or an error's evidence.

use crate::boundary::Refusal;
use fencing_runtime::{Policy, accept};
use redis_module::RedisString;

/// An error reply naming the argument: `ERR <what> <problem>`.
pub fn invalid(what: &str, problem: impl std::fmt::Display) -> Refusal {
    Refusal::new(format!("ERR {what} {problem}"))
}

/// A token or sequence: canonical decimal, 0 to 2^64-1.
pub fn number(arg: &RedisString, what: &str) -> Result<u64, Refusal> {
    accept::number(arg.as_slice()).map_err(|e| invalid(what, e))
}

/// A name (a lock, a holder): the hosts' one rule for names.
pub fn name<'a>(arg: &'a RedisString, what: &str) -> Result<&'a str, Refusal> {
    accept::name_bytes(arg.as_slice()).map_err(|e| invalid(what, e))
}

/// Any lock name the contract takes (UTF-8, nothing more):
/// `FENCING.DECIDE` decides, it stores nothing, and the shared decision
/// vectors use names no host stores (the empty name, 300 characters).
pub fn contract_lock(arg: &RedisString) -> Result<String, Refusal> {
    std::str::from_utf8(arg.as_slice())
        .map(str::to_owned)
        .map_err(|_| invalid("lock", "is not UTF-8 text (name_not_utf8)"))
}

/// A policy, spelled exactly as in the contract.
pub fn policy(arg: &RedisString) -> Result<Policy, Refusal> {
    accept::policy(arg.as_slice()).map_err(|e| invalid("POLICY", e))
}

/// A `PROOF` argument: the grant's proof in hex.
pub fn proof(arg: &RedisString) -> Result<Vec<u8>, Refusal> {
    accept::proof(arg.as_slice()).map_err(|e| invalid("PROOF", e))
}

/// The options after a fenced write's fixed arguments: `SEQ n`, `POLICY p`, `PROOF hex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    pub sequence: Option<u64>,
    pub policy: Policy,
    /// The grant's proof (signed tokens: the module's `VERIFY` keys check it).
    pub proof: Option<Vec<u8>>,
}

fn is(word: &RedisString, name: &str) -> bool {
    word.as_slice().eq_ignore_ascii_case(name.as_bytes())
}

/// Reads `SEQ n`, `POLICY p` and `PROOF hex` (each at most once, any order)
/// from the front of `args`; the rest is returned.
pub fn write_options(args: &[RedisString]) -> Result<(WriteOptions, &[RedisString]), Refusal> {
    let mut options = WriteOptions { sequence: None, policy: Policy::NonDecreasing, proof: None };
    let mut policy_given = false;
    let mut rest = args;
    loop {
        let Some(word) = rest.first() else { return Ok((options, rest)) };
        let option = ["SEQ", "POLICY", "PROOF"].into_iter().find(|o| is(word, o));
        let Some(option) = option else { return Ok((options, rest)) };
        let Some(value) = rest.get(1) else { return Err(invalid(option, "needs a value")) };
        let twice = match option {
            "SEQ" => options.sequence.replace(number(value, "SEQ")?).is_some(),
            "POLICY" => {
                options.policy = policy(value)?;
                std::mem::replace(&mut policy_given, true)
            }
            _ => options.proof.replace(proof(value)?).is_some(),
        };
        if twice {
            return Err(invalid(option, "is given twice"));
        }
        rest = &rest[2..];
    }
}
