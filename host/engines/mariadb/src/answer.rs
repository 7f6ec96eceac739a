//! The JSON the decision functions on plain values answer (`fencing_admit`,
//! `fencing_admit_signed`): a decision and its evidence, or why an argument
//! was refused, written once.

use crate::args::ArgError;
use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{Admission, Rejection};

/// An optional number as JSON (`null` for none).
fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "null".into(), |v| v.to_string())
}

/// A decision as JSON: `{"admitted":true,"high_water":34,"sequence":null,"new_term":true}`
/// or `{"admitted":false,"reason":"stale_token","presented":33,"high_water":34}`.
pub fn decision(d: &Result<Admission, SignedRejection>) -> String {
    match d {
        Ok(a) => format!(
            r#"{{"admitted":true,"high_water":{},"sequence":{},"new_term":{}}}"#,
            a.high_water,
            opt(a.sequence),
            a.new_term
        ),
        Err(r) => format!(r#"{{"admitted":false,"reason":"{}"{}}}"#, r.reason(), evidence(r)),
    }
}

/// A refusal's evidence as JSON members, each led by a comma.
fn evidence(r: &SignedRejection) -> String {
    match r {
        SignedRejection::Fence(Rejection::StaleToken { presented, high_water })
        | SignedRejection::Fence(Rejection::TokenReused { presented, high_water }) => {
            format!(r#","presented":{presented},"high_water":{high_water}"#)
        }
        SignedRejection::Fence(Rejection::SequenceRegressed { token, presented, last }) => {
            format!(r#","token":{token},"presented":{},"last":{last}"#, opt(*presented))
        }
        SignedRejection::Proof(ProofRejection::UnknownKey { key_id }) => format!(r#","key_id":{key_id}"#),
        _ => String::new(),
    }
}

/// `s` as a JSON string.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A refused argument as JSON: `{"error":"name_control","message":"lock contains ..."}`.
pub fn arg_error(e: &ArgError) -> String {
    format!(r#"{{"error":"{}","message":{}}}"#, e.code, string(&format!("fencing: {}", e.message)))
}

/// A guard that could not decide, as JSON.
pub fn failure(why: &str) -> String {
    format!(r#"{{"error":"guard_failure","message":{}}}"#, string(&format!("fencing: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_and_errors_read_as_json() {
        let stale = Err(SignedRejection::Fence(Rejection::StaleToken { presented: 33, high_water: 34 }));
        assert_eq!(decision(&stale), r#"{"admitted":false,"reason":"stale_token","presented":33,"high_water":34}"#);
        let ok = Ok(Admission { high_water: 34, sequence: Some(2), new_term: true });
        assert_eq!(decision(&ok), r#"{"admitted":true,"high_water":34,"sequence":2,"new_term":true}"#);
        assert_eq!(string("a\"b\\\u{1}"), r#""a\"b\\\u0001""#);
    }
}
