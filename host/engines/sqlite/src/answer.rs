//! The JSON the SQL functions answer with: a decision (`fencing_admit`,
//! `fencing_admit_signed`) and its evidence, and a fence (`fencing_fence`,
//! the reset records), written once.

use fencing_runtime::{Decision, Fence, Rejection};

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

/// A fence as JSON (`{"lock":..,"high_water":..,"sequence":..}`), with the
/// carrier whose rows could not be read when there is one.
pub fn fence_json(f: &Fence, carrier_missing: Option<&str>) -> String {
    let missing = carrier_missing.map_or_else(String::new, |c| format!(r#","carrier_missing":{}"#, json_string(c)));
    format!(
        r#"{{"lock":{},"high_water":{},"sequence":{}{missing}}}"#,
        json_string(&f.lock),
        f.high_water,
        json_opt(f.sequence)
    )
}

/// `s` as a JSON string.
pub fn json_string(s: &str) -> String {
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
