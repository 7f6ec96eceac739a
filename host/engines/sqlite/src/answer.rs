//! The JSON the SQL functions answer with: a decision (`fencing_admit`,
//! `fencing_admit_signed`) and its evidence, written once.

use fencing_runtime::{Decision, Rejection};

/// A decision as the JSON `fencing_admit` answers.
pub fn decision_json(decision: &Decision) -> String {
    match decision {
        Ok(a) => format!(
            r#"{{"admitted":true,"high_water":{},"sequence":{},"new_term":{}}}"#,
            a.high_water,
            json_opt(a.sequence),
            a.new_term
        ),
        Err(r) => format!(r#"{{"admitted":false,"reason":"{}"{}}}"#, r.reason(), evidence_json(r)),
    }
}

/// An optional number as JSON (`null` for none).
pub fn json_opt(v: Option<u64>) -> String {
    v.map_or_else(|| "null".into(), |v| v.to_string())
}

/// A refusal's evidence as JSON members, each led by a comma.
fn evidence_json(r: &Rejection) -> String {
    match r {
        Rejection::InvalidToken | Rejection::WrongLock => String::new(),
        Rejection::StaleToken { presented, high_water } | Rejection::TokenReused { presented, high_water } => {
            format!(r#","presented":{presented},"high_water":{high_water}"#)
        }
        Rejection::SequenceRegressed { token, presented, last } => {
            format!(r#","token":{token},"presented":{},"last":{last}"#, json_opt(*presented))
        }
    }
}
