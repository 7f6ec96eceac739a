//! Unsigned 64-bit fields as JSON Schema reads them: an integer is any
//! number with a zero fraction, so `546`, `546.0` and `5.46e2` are the same
//! token, as the published description's `"type": "integer"` promises.
//!
//! Invariants:
//! - a value is taken if and only if it is a whole number from 0 to
//!   2^64-1 (the description's `minimum` and `maximum`); anything else is
//!   refused naming the field: a fraction, a negative number, one above
//!   2^64-1, a string, `true`;
//! - a number written with a fraction or an exponent is read as the binary
//!   double every JSON Schema validator (and JavaScript) reads it as, so the
//!   server and the description agree on every such text: `1e19` is
//!   10,000,000,000,000,000,000, and an integer above 2^53 is exact only
//!   when written without them (as every client of this API writes tokens).

use serde::de::{self, Deserializer, Unexpected, Visitor};

/// What a refused value was expected to be.
const EXPECTED: &str = "an integer from 0 to 18446744073709551615";

/// 2^64 as a double: the first whole double a u64 cannot hold.
const TWO_64: f64 = 18_446_744_073_709_551_616.0;

struct Integral;

impl Visitor<'_> for Integral {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &EXPECTED))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Other("an integer above 2^64-1"), &EXPECTED))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Other("an integer out of range"), &EXPECTED))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if v.is_finite() && v.fract() == 0.0 && (0.0..TWO_64).contains(&v) {
            // Whole and in range: the cast is exact.
            return Ok(v as u64);
        }
        Err(E::invalid_value(Unexpected::Float(v), &EXPECTED))
    }
}

/// `#[serde(deserialize_with)]` for a `u64` field.
pub fn u64_integral<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(Integral)
}

/// `#[serde(default, deserialize_with)]` for an `Option<u64>` field (`null` is `None`).
pub fn opt_u64_integral<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    struct Optional;
    impl<'de> Visitor<'de> for Optional {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "{EXPECTED}, or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<u64>, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<u64>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
            u64_integral(d).map(Some)
        }
    }
    deserializer.deserialize_option(Optional)
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize)]
    struct Body {
        #[serde(deserialize_with = "super::u64_integral")]
        token: u64,
        #[serde(default, deserialize_with = "super::opt_u64_integral")]
        sequence: Option<u64>,
    }

    fn token(text: &str) -> Result<u64, String> {
        serde_json::from_str::<Body>(&format!(r#"{{"token": {text}}}"#)).map(|b| b.token).map_err(|e| e.to_string())
    }

    #[test]
    fn a_number_with_a_zero_fraction_is_the_integer_it_denotes() {
        assert_eq!(token("546"), Ok(546));
        assert_eq!(token("546.0"), Ok(546));
        assert_eq!(token("5.46e2"), Ok(546));
        assert_eq!(token("0.0"), Ok(0));
        assert_eq!(token("-0.0"), Ok(0));
        assert_eq!(token("1e19"), Ok(10_000_000_000_000_000_000));
        assert_eq!(token("18446744073709551615"), Ok(u64::MAX));
        // The largest double below 2^64.
        assert_eq!(token("1.844674407370955e19"), Ok(18_446_744_073_709_549_568));
    }

    #[test]
    fn anything_but_a_whole_number_in_range_is_refused() {
        for bad in ["546.5", "-1", "-1.0", "18446744073709551616", "1.8446744073709552e19", "9.9e19", "\"5\"", "true"] {
            let e = token(bad).expect_err(bad);
            assert!(
                e.contains("an integer from 0 to 18446744073709551615") || e.contains("invalid type"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn an_optional_field_takes_null_absence_and_whole_numbers() {
        let seq = |text: &str| serde_json::from_str::<Body>(text).map(|b| b.sequence).map_err(|e| e.to_string());
        assert_eq!(seq(r#"{"token": 1}"#), Ok(None));
        assert_eq!(seq(r#"{"token": 1, "sequence": null}"#), Ok(None));
        assert_eq!(seq(r#"{"token": 1, "sequence": 7.0}"#), Ok(Some(7)));
        assert!(seq(r#"{"token": 1, "sequence": 7.5}"#).is_err());
    }
}
