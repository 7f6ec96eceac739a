//! One row's decision, as the protected tables' triggers ask for it, and the
//! words of its refusal, written once.
//!
//! A trigger calls `fencing_check(..)` with what the row presents and the
//! resource's fence, and gets a verdict code ([`code`]); only on a refusal it
//! calls `fencing_refusal(code, table, ..)` with the same arguments for the
//! message, and `fencing.refuse` raises it with the code's SQLSTATE. The hot
//! path therefore builds no string. A refusal's message names the reason,
//! the table, the resource and the lock, the presented token and the
//! high-water mark, as every host words it:
//!
//! ```text
//! fencing: stale_token: table app.orders, resource "o-1", lock "o-1": presented token 33, high_water 34 (bound to lock "o-1")
//! ```

use crate::args::{self, ArgError, Value};
use crate::guard::{self, Failure};
use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{Fence, Policy, Rejection, Sequencer};
use std::cell::RefCell;
use std::fmt::Write as _;

/// Verdict codes of `fencing_check`; each refusal's SQLSTATE is `FN0` and
/// its two digits (`fencing.refuse`), an argument's is 22023 or 22003.
pub mod code {
    pub const ADMITTED: i64 = 0;
    pub const STALE_TOKEN: i64 = 1;
    pub const TOKEN_REUSED: i64 = 2;
    pub const WRONG_LOCK: i64 = 3;
    /// A token of 0, or no token presented at all.
    pub const INVALID_TOKEN: i64 = 4;
    pub const SEQUENCE_REGRESSED: i64 = 5;
    pub const PROOF_MISSING: i64 = 6;
    pub const PROOF_MALFORMED: i64 = 7;
    pub const PROOF_UNKNOWN_KEY: i64 = 8;
    pub const PROOF_BAD: i64 = 9;
    /// The guard could not decide (or the keys or the plugin could not be loaded).
    pub const GUARD_FAILURE: i64 = 10;
    /// The resource's mark lives in another table's row, or its carrier row is gone (decided in SQL).
    pub const CARRIED: i64 = 11;
    /// An argument the shared rules refuse (SQLSTATE 22023).
    pub const BAD_ARGUMENT: i64 = 20;
    /// A token or sequence out of range (SQLSTATE 22003).
    pub const OUT_OF_RANGE: i64 = 21;
}

/// A row's write, read from the arguments.
pub struct Row {
    pub resource: String,
    pub current: Option<Fence>,
    /// `None`: no token presented.
    pub presented: Option<Sequencer>,
    pub lock: String,
    pub policy: Policy,
    keys: Option<String>,
    proof: Vec<u8>,
    plugin: Option<String>,
}

impl Row {
    /// Reads `fencing_check`'s arguments (`values` in [`CHECK_ARGS`] order).
    pub fn read(values: &[Value<'_>; 11]) -> Result<Row, ArgError> {
        let resource = args::name(values[0], "resource")?.ok_or_else(|| ArgError::missing("resource"))?;
        let current = match args::name(values[1], "fence lock")? {
            None => None,
            Some(lock) => Some(Fence {
                lock,
                high_water: args::number(values[2], "fence high_water", false)?.unwrap_or(0),
                sequence: args::number(values[3], "fence sequence", false)?,
            }),
        };
        let lock = args::name(values[4], "lock")?.unwrap_or_else(|| resource.clone());
        let token = args::number(values[5], "token", false)?;
        let sequence = args::number(values[6], "sequence", false)?;
        let policy = args::policy(values[7])?;
        let keys = args::text(values[8], "verify_keys")?.map(str::to_owned);
        let proof = args::proof(values[9], "@fencing_proof")?;
        let plugin = args::text(values[10], "plugin")?.map(str::to_owned);
        let presented = token.map(|token| Sequencer { lock: lock.clone(), token, sequence });
        Ok(Row { resource, current, presented, lock, policy, keys, proof, plugin })
    }

    /// The component's verdict code for this row.
    fn decide(&self) -> Result<i64, Failure> {
        let Some(presented) = &self.presented else { return Ok(code::INVALID_TOKEN) };
        let verifier = guard::verifier(self.keys.as_deref())?;
        let guard = guard::guard(self.plugin.as_deref())?;
        let decision =
            guard::decide(&guard, verifier.as_deref(), self.current.as_ref(), presented, &self.proof, self.policy)?;
        Ok(match decision {
            Ok(_) => code::ADMITTED,
            Err(r) => signed_code(&r),
        })
    }
}

/// The verdict code of a refusal.
pub fn signed_code(r: &SignedRejection) -> i64 {
    match r {
        SignedRejection::Fence(Rejection::StaleToken { .. }) => code::STALE_TOKEN,
        SignedRejection::Fence(Rejection::TokenReused { .. }) => code::TOKEN_REUSED,
        SignedRejection::Fence(Rejection::WrongLock) => code::WRONG_LOCK,
        SignedRejection::Fence(Rejection::InvalidToken) => code::INVALID_TOKEN,
        SignedRejection::Fence(Rejection::SequenceRegressed { .. }) => code::SEQUENCE_REGRESSED,
        SignedRejection::Proof(ProofRejection::Missing) => code::PROOF_MISSING,
        SignedRejection::Proof(ProofRejection::Malformed) => code::PROOF_MALFORMED,
        SignedRejection::Proof(ProofRejection::UnknownKey { .. }) => code::PROOF_UNKNOWN_KEY,
        SignedRejection::Proof(ProofRejection::BadProof) => code::PROOF_BAD,
        // Keys are parsed before a signed decision is asked for: none is a failure.
        SignedRejection::Proof(ProofRejection::NoKeys) => code::GUARD_FAILURE,
    }
}

thread_local! {
    /// Why this thread's last decision failed: a refusal's message is asked
    /// for on the same thread, by the same statement, right after.
    static LAST_FAILURE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Remembers why the guard could not decide, for the refusal's message.
pub fn note_failure(why: &str) {
    LAST_FAILURE.with(|f| why.clone_into(&mut f.borrow_mut()));
}

/// `fencing_check`: the verdict code of a row's write.
pub fn check(values: &[Value<'_>; 11]) -> i64 {
    match Row::read(values) {
        Err(e) if e.out_of_range() => code::OUT_OF_RANGE,
        Err(_) => code::BAD_ARGUMENT,
        Ok(row) => row.decide().unwrap_or_else(|why| {
            note_failure(&why);
            code::GUARD_FAILURE
        }),
    }
}

/// Longest name a message shows whole, in characters; longer ones are cut,
/// so that a message stays within SIGNAL's 512 characters.
const SHOWN_NAME: usize = 64;

/// A name as a message shows it: quoted, at most [`SHOWN_NAME`] characters.
fn shown(name: &str) -> String {
    if name.chars().count() <= SHOWN_NAME {
        format!("{name:?}")
    } else {
        let head: String = name.chars().take(SHOWN_NAME - 4).collect();
        format!("{head:?}...")
    }
}

/// `fencing_refusal`: the message of a refusal with verdict `code` on
/// `table`; `carrier` is the table that carries the resource's mark (code
/// [`code::CARRIED`]), or `(missing)` when the carrier row is gone.
pub fn refusal(code: i64, table: &str, values: &[Value<'_>; 11], carrier: Option<&str>) -> String {
    let table = if table.chars().count() > 130 { "(a long name)" } else { table };
    let row = match Row::read(values) {
        Ok(row) => row,
        Err(e) => return format!("fencing: {}: table {table}: {}", e.code, e.message),
    };
    let mut m = format!("fencing: {}: table {table}, resource {}", reason(code, &row), shown(&row.resource));
    if code == code::CARRIED {
        return match carrier {
            Some(c) if c != table => {
                m + &format!(": its mark is carried by the rows of {c} (fence in row); write the resource there")
            }
            _ => {
                m + ": its mark was carried by a row of this table that is gone without a DELETE (TRUNCATE, \
                     DROP TABLE); an administrator's CALL fencing.reset_fence(..) sets the mark again"
            }
        };
    }
    let _ = write!(m, ", lock {}: ", shown(&row.lock));
    let Some(p) = &row.presented else {
        return m + "the write presents no token (set the token column, or SET @fencing_token first)";
    };
    let seq = |s: Option<u64>| s.map_or_else(String::new, |v| format!(" sequence {v}"));
    let _ = write!(m, "presented token {}{}", p.token, seq(p.sequence));
    match code {
        code::PROOF_MISSING => m.push_str(
            " without a proof, and this database verifies tokens (fencing.settings verify_keys): \
             SET @fencing_proof to the grant's fencing_proof",
        ),
        code::PROOF_MALFORMED => m.push_str(" with a proof that is not a fencing proof"),
        code::PROOF_UNKNOWN_KEY => m.push_str(" with a proof of a key that verify_keys does not hold"),
        code::PROOF_BAD => {
            m.push_str(" with a proof not made for this lock and token: the lock service did not grant it")
        }
        code::GUARD_FAILURE => {
            let why = LAST_FAILURE.with(|f| f.borrow().clone());
            let why = if why.is_empty() { "no reason recorded".to_string() } else { why };
            let why: String = why.chars().take(200).collect();
            let _ = write!(m, ": the guard could not decide ({why}); nothing was written");
        }
        _ => {
            let fence = match &row.current {
                None => "no fence".to_string(),
                Some(f) => format!("high_water {}{} (bound to lock {})", f.high_water, seq(f.sequence), shown(&f.lock)),
            };
            let _ = write!(m, ", {fence}");
        }
    }
    m
}

/// A verdict code's reason, as every host names it.
fn reason(code: i64, row: &Row) -> &'static str {
    match code {
        code::STALE_TOKEN => "stale_token",
        code::TOKEN_REUSED => "token_reused",
        code::WRONG_LOCK => "wrong_lock",
        code::INVALID_TOKEN if row.presented.is_none() => "missing_token",
        code::INVALID_TOKEN => "invalid_token",
        code::SEQUENCE_REGRESSED => "sequence_regressed",
        code::PROOF_MISSING => "proof_missing",
        code::PROOF_MALFORMED => "proof_malformed",
        code::PROOF_UNKNOWN_KEY => "proof_unknown_key",
        code::PROOF_BAD => "proof_bad",
        code::CARRIED => "carried_elsewhere",
        _ => "guard_failure",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<'a>(fence: Option<(&'a str, i64)>, token: Value<'a>, lock: Value<'a>) -> [Value<'a>; 11] {
        let (fl, hw) = match fence {
            Some((l, h)) => (Value::Text(l.as_bytes()), Value::Int(h)),
            None => (Value::Null, Value::Null),
        };
        [
            Value::Text(b"o-1"),
            fl,
            hw,
            Value::Null,
            lock,
            token,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ]
    }

    #[test]
    fn codes_and_messages_name_the_reason_and_the_evidence() {
        let stale = values(Some(("o-1", 34)), Value::Int(33), Value::Null);
        assert_eq!(check(&stale), code::STALE_TOKEN);
        assert_eq!(
            refusal(code::STALE_TOKEN, "app.orders", &stale, None),
            r#"fencing: stale_token: table app.orders, resource "o-1", lock "o-1": presented token 33, high_water 34 (bound to lock "o-1")"#
        );
        assert_eq!(check(&values(Some(("o-1", 34)), Value::Int(34), Value::Null)), code::ADMITTED);
        assert_eq!(check(&values(None, Value::Int(1), Value::Null)), code::ADMITTED);
        let missing = values(Some(("o-1", 34)), Value::Null, Value::Null);
        assert_eq!(check(&missing), code::INVALID_TOKEN);
        assert!(refusal(code::INVALID_TOKEN, "t", &missing, None).starts_with("fencing: missing_token: table t"));
        let nul = values(None, Value::Int(1), Value::Text(b"a\0"));
        assert_eq!(check(&nul), code::BAD_ARGUMENT);
        assert_eq!(
            refusal(code::BAD_ARGUMENT, "t", &nul, None),
            "fencing: name_control: table t: lock contains control character U+0000 (name_control)"
        );
        assert_eq!(check(&values(None, Value::Int(-3), Value::Null)), code::OUT_OF_RANGE);
        let long = "x".repeat(256);
        let long_lock = values(Some((long.as_str(), 9)), Value::Int(3), Value::Text(long.as_bytes()));
        assert!(refusal(code::STALE_TOKEN, &"t".repeat(129), &long_lock, None).chars().count() <= 512);
    }
}
