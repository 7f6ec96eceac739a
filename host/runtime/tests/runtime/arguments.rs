//! The shared argument vectors (`tests/vectors/arguments/`) through
//! `fencing_runtime::accept`, the rules every host calls.

use fencing_runtime::accept;
use serde_json::Value;
use std::path::Path;

fn cases() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/arguments");
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the argument vectors") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("JSON");
            cases.extend(file["cases"].as_array().expect("cases").iter().cloned());
        }
    }
    assert!(cases.len() > 50, "every kind has cases");
    cases
}

/// The case's input as bytes: `text` repeated `repeat` times, or `bytes_hex`.
fn input(case: &Value) -> Vec<u8> {
    if let Some(hex) = case["bytes_hex"].as_str() {
        return accept::unhex(hex.as_bytes()).expect("bytes_hex");
    }
    let text = case["text"].as_str().expect("text");
    text.repeat(case["repeat"].as_u64().unwrap_or(1) as usize).into_bytes()
}

/// What the rules say of the case: `Ok(value)` or `Err(code)`.
fn verdict(case: &Value) -> Result<Value, String> {
    let code = |c: &str| c.to_owned();
    match case["kind"].as_str().expect("kind") {
        "name" => accept::name_bytes(&input(case)).map(Value::from).map_err(|e| code(e.code())),
        "policy" => accept::policy(&input(case)).map(|p| Value::from(p.name())).map_err(|e| code(e.code())),
        "number" => accept::number(&input(case)).map(Value::from).map_err(|e| code(e.code())),
        "from_signed" => {
            let v = case["value"].as_i64().expect("a signed value");
            accept::from_signed(v).map(Value::from).map_err(|e| code(e.code()))
        }
        "to_signed" => {
            let v = case["value"].as_u64().expect("an unsigned value");
            accept::to_signed(v).map(Value::from).map_err(|e| code(e.code()))
        }
        "proof" => accept::proof(&input(case))
            .map(|b| Value::from(fencing_runtime::key_text::hex(&b)))
            .map_err(|e| code(e.code())),
        other => panic!("unknown kind {other}"),
    }
}

#[test]
fn every_argument_vector_gets_its_verdict() {
    let mut failed = Vec::new();
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let expect = case["expect"].as_str().unwrap();
        match (verdict(&case), expect) {
            (Ok(value), "ok") => {
                let want = &case["value"];
                let same = want.is_null() || *want == value;
                if !same {
                    failed.push(format!("{name}: value {value}, expected {want}"));
                }
            }
            (Err(code), want) if code == want => {}
            (got, want) => failed.push(format!("{name}: {got:?}, expected {want}")),
        }
    }
    assert!(failed.is_empty(), "{} argument vectors failed:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn every_refusal_names_its_code() {
    for case in cases() {
        if let Err(code) = verdict(&case) {
            // The text a host shows carries the same code.
            let shown = match case["kind"].as_str().unwrap() {
                "name" => accept::name_bytes(&input(&case)).unwrap_err().to_string(),
                "policy" => accept::policy(&input(&case)).unwrap_err().to_string(),
                "number" => accept::number(&input(&case)).unwrap_err().to_string(),
                "from_signed" => accept::from_signed(case["value"].as_i64().unwrap()).unwrap_err().to_string(),
                "to_signed" => accept::to_signed(case["value"].as_u64().unwrap()).unwrap_err().to_string(),
                _ => accept::proof(&input(&case)).unwrap_err().to_string(),
            };
            assert!(shown.ends_with(&format!("({code})")), "{shown:?} names {code}");
        }
    }
}
