//! The edge between mariadbd and Rust: no panic may cross it.
//!
//! A panic unwinding out of an `extern "C"` function aborts the process, and
//! here the process is the database server. Every UDF body runs inside
//! [`guarded`], which catches a panic and turns it into the function's
//! failure answer (an error code, an error JSON, an init error), with the
//! panic's message.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `body`; a panic becomes `on_panic(its message)`.
pub fn guarded<T>(on_panic: impl FnOnce(String) -> T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            on_panic(format!("internal error: {message}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_failure_answer() {
        let answer = guarded(|m| m, || -> String { panic!("boom") });
        assert_eq!(answer, "internal error: boom");
        assert_eq!(guarded(|_| 0, || 7), 7);
    }
}
