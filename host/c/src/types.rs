//! The header's structs as Rust sees them (`#[repr(C)]`, sizes and offsets
//! pinned here and by `_Static_assert`s in the C tests, so the header and
//! the library cannot drift apart unnoticed), and the one place a rule
//! type's decision becomes a `fencing_verdict`.

use fencing_runtime::code;
use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{Admission, Rejection, Verdict};
use std::ffi::c_char;
use std::mem::{offset_of, size_of};

/// `FENCING_NOT_DECIDED`: written into the caller's verdicts on an error.
pub const NOT_DECIDED: u32 = 255;

/// `fencing_fence`.
#[repr(C)]
pub struct CFence {
    pub lock: *const c_char,
    pub lock_len: usize,
    pub high_water: u64,
    pub sequence: u64,
    pub has_sequence: u8,
    pub reserved: [u8; 7],
}

/// `fencing_sequencer`.
#[repr(C)]
pub struct CSequencer {
    pub lock: *const c_char,
    pub lock_len: usize,
    pub token: u64,
    pub sequence: u64,
    pub has_sequence: u8,
    pub reserved: [u8; 7],
}

/// `fencing_write`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CWrite {
    pub token: u64,
    pub sequence: u64,
    pub has_sequence: u8,
    pub reserved: [u8; 7],
}

/// `fencing_fence_state`.
#[repr(C)]
pub struct CFenceState {
    pub high_water: u64,
    pub sequence: u64,
    pub has_fence: u8,
    pub has_sequence: u8,
    pub reserved: [u8; 6],
}

/// `fencing_key`.
#[repr(C)]
pub struct CKey {
    pub id: u32,
    pub algorithm: u32,
    pub material: *const u8,
    pub material_len: usize,
}

/// `fencing_verdict`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CVerdict {
    pub code: u32,
    pub key_id: u32,
    pub high_water: u64,
    pub sequence: u64,
    pub token: u64,
    pub presented_sequence: u64,
    pub last_sequence: u64,
    pub admitted: u8,
    pub new_term: u8,
    pub has_sequence: u8,
    pub has_presented_sequence: u8,
    pub reserved: [u8; 4],
}

// The header's layout (x86_64 and every LP64 target), checked at compile time.
const _: () = {
    assert!(
        size_of::<CFence>() == 40 && offset_of!(CFence, high_water) == 16 && offset_of!(CFence, has_sequence) == 32
    );
    assert!(size_of::<CSequencer>() == 40 && offset_of!(CSequencer, token) == 16);
    assert!(size_of::<CWrite>() == 24 && offset_of!(CWrite, has_sequence) == 16);
    assert!(size_of::<CFenceState>() == 24 && offset_of!(CFenceState, has_sequence) == 17);
    assert!(size_of::<CKey>() == 24 && offset_of!(CKey, material) == 8);
    assert!(size_of::<CVerdict>() == 56 && offset_of!(CVerdict, high_water) == 8);
    assert!(offset_of!(CVerdict, last_sequence) == 40 && offset_of!(CVerdict, admitted) == 48);
};

fn optional(value: Option<u64>) -> (u64, u8) {
    value.map_or((0, 0), |v| (v, 1))
}

impl CVerdict {
    const EMPTY: CVerdict = CVerdict {
        code: NOT_DECIDED,
        key_id: 0,
        high_water: 0,
        sequence: 0,
        token: 0,
        presented_sequence: 0,
        last_sequence: 0,
        admitted: 0,
        new_term: 0,
        has_sequence: 0,
        has_presented_sequence: 0,
        reserved: [0; 4],
    };

    /// What an error leaves in the caller's verdicts: no decision.
    pub fn not_decided() -> CVerdict {
        CVerdict::EMPTY
    }

    /// A fence decision.
    #[inline]
    pub fn of(decision: &Result<Admission, Rejection>) -> CVerdict {
        let mut v = CVerdict::EMPTY;
        match *decision {
            Ok(a) => {
                v.code = u32::from(if a.new_term { code::ADMITTED_NEW_TERM } else { code::ADMITTED });
                v.admitted = 1;
                v.new_term = u8::from(a.new_term);
                v.high_water = a.high_water;
                (v.sequence, v.has_sequence) = optional(a.sequence);
            }
            Err(Rejection::InvalidToken) => v.code = u32::from(code::INVALID_TOKEN),
            Err(Rejection::WrongLock) => v.code = u32::from(code::WRONG_LOCK),
            Err(Rejection::StaleToken { presented, high_water }) => {
                (v.code, v.token, v.high_water) = (u32::from(code::STALE_TOKEN), presented, high_water);
            }
            Err(Rejection::TokenReused { presented, high_water }) => {
                (v.code, v.token, v.high_water) = (u32::from(code::TOKEN_REUSED), presented, high_water);
            }
            Err(Rejection::SequenceRegressed { token, presented, last }) => {
                (v.code, v.token, v.last_sequence) = (u32::from(code::SEQUENCE_REGRESSED), token, last);
                (v.presented_sequence, v.has_presented_sequence) = optional(presented);
            }
        }
        v
    }

    /// A signed decision: the proof's refusal, or the fence's decision.
    pub fn of_signed(decision: &Result<Admission, SignedRejection>) -> CVerdict {
        match decision {
            Ok(a) => CVerdict::of(&Ok(*a)),
            Err(SignedRejection::Fence(r)) => CVerdict::of(&Err(r.clone())),
            Err(SignedRejection::Proof(p)) => {
                let mut v = CVerdict { code: u32::from(p.code()), ..CVerdict::EMPTY };
                if let ProofRejection::UnknownKey { key_id } = p {
                    v.key_id = *key_id;
                }
                v
            }
        }
    }

    /// A stream token's verdict, `high_water` the mark before it.
    pub fn of_stream(verdict: Verdict, token: u64, high_water: u64) -> CVerdict {
        match verdict {
            Verdict::Admitted => {
                CVerdict::of(&Ok(Admission { high_water: token, sequence: None, new_term: token > high_water }))
            }
            Verdict::InvalidToken => CVerdict::of(&Err(Rejection::InvalidToken)),
            Verdict::StaleToken => CVerdict::of(&Err(Rejection::StaleToken { presented: token, high_water })),
            Verdict::TokenReused => CVerdict::of(&Err(Rejection::TokenReused { presented: token, high_water })),
        }
    }
}

/// `fencing_reason`'s answers, by code.
pub fn reason(c: u32) -> Option<&'static std::ffi::CStr> {
    Some(match c {
        0 | 1 => c"admitted",
        2 => c"invalid_token",
        3 => c"wrong_lock",
        4 => c"stale_token",
        5 => c"token_reused",
        6 => c"sequence_regressed",
        7 => c"proof_no_keys",
        8 => c"proof_missing",
        9 => c"proof_malformed",
        10 => c"proof_unknown_key",
        11 => c"proof_bad",
        NOT_DECIDED => c"not_decided",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencing_runtime::proof::ProofRejection;

    #[test]
    fn reasons_are_the_rules_words() {
        let rejections = [
            Rejection::InvalidToken,
            Rejection::WrongLock,
            Rejection::StaleToken { presented: 1, high_water: 2 },
            Rejection::TokenReused { presented: 2, high_water: 2 },
            Rejection::SequenceRegressed { token: 2, presented: None, last: 3 },
        ];
        for r in rejections {
            let v = CVerdict::of(&Err(r.clone()));
            assert_eq!(reason(v.code).unwrap().to_str().unwrap(), r.reason());
            assert_eq!(v.admitted, 0);
        }
        for p in [ProofRejection::NoKeys, ProofRejection::Missing, ProofRejection::Malformed, ProofRejection::BadProof]
        {
            let v = CVerdict::of_signed(&Err(SignedRejection::Proof(p)));
            assert_eq!(reason(v.code).unwrap().to_str().unwrap(), p.reason());
        }
        let v = CVerdict::of_signed(&Err(SignedRejection::Proof(ProofRejection::UnknownKey { key_id: 9 })));
        assert_eq!((v.code, v.key_id), (u32::from(code::PROOF_UNKNOWN_KEY), 9));
        assert_eq!(reason(12), None);
        assert_eq!(reason(NOT_DECIDED).unwrap().to_str().unwrap(), "not_decided");
    }

    #[test]
    fn an_admission_carries_the_fence_to_persist() {
        let v = CVerdict::of(&Ok(Admission { high_water: 34, sequence: Some(2), new_term: true }));
        assert_eq!((v.code, v.admitted, v.new_term, v.high_water, v.sequence, v.has_sequence), (1, 1, 1, 34, 2, 1));
        let v = CVerdict::of_stream(Verdict::Admitted, 5, 5);
        assert_eq!((v.code, v.new_term, v.high_water), (0, 0, 5));
        let v = CVerdict::of_stream(Verdict::StaleToken, 4, 5);
        assert_eq!((v.code, v.token, v.high_water), (4, 4, 5));
    }
}
