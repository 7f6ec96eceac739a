package guard

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// What the package accepts around the rules: the rules every fencing host
// applies to what it is given (guest/src/accept.rs in the repository).
// A value they refuse is an *InvalidInputError whose Code is the rule's
// (name_control, ...), the code the shared argument vectors name and every
// host's error text ends with. A refusal of the contract's own (a stale
// token) is a Decision, never an error.
//
//   - a name is 1 to MaxNameChars characters of UTF-8 (at most 1,024 bytes)
//     with no control character (U+0000-U+001F, U+007F-U+009F: NUL is
//     refused, never truncated at) and no white space (Unicode's White_Space,
//     unicode.IsSpace) at either end. A Go string is bytes, so bytes that are
//     not UTF-8 are refused too. Names compare as bytes: nothing normalizes
//     or folds case. A Guard checks a name once, when it first interns it;
//   - a policy is one of the Policy constants;
//   - tokens, sequences and marks are uint64: every value is one;
//   - a proof is at most MaxProofBytes bytes (a proof is 37 or 69).

// MaxNameChars is the longest name, in characters (runes).
const MaxNameChars = 256

// MaxProofBytes is the longest proof (512 hex digits, the bound of the proof's text).
const MaxProofBytes = 256

// CheckName returns nil when name is a name every fencing host takes, else
// an *InvalidInputError with the rule's Code. The Guard applies it to every
// lock name it interns.
func CheckName(name string) error { return checkName(name, "name") }

func checkName(name, field string) error {
	refuse := func(problem, code string) error {
		return &InvalidInputError{Field: field, Problem: problem, Code: code}
	}
	// Four bytes a character at most: a longer string cannot be a name, and
	// is not decoded.
	if len(name) > 4*MaxNameChars {
		return refuse(fmt.Sprintf("is %d bytes, longer than %d characters can be", len(name), MaxNameChars), "name_too_long")
	}
	if !utf8.ValidString(name) {
		return refuse("is not UTF-8 text", "name_not_utf8")
	}
	if name == "" {
		return refuse("must not be empty", "name_empty")
	}
	if n := utf8.RuneCountInString(name); n > MaxNameChars {
		return refuse(fmt.Sprintf("is %d characters, longer than %d", n, MaxNameChars), "name_too_long")
	}
	for _, r := range name {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return refuse(fmt.Sprintf("contains control character U+%04X", r), "name_control")
		}
	}
	first, _ := utf8.DecodeRuneInString(name)
	last, _ := utf8.DecodeLastRuneInString(name)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return refuse("must not begin or end with white space", "name_whitespace")
	}
	return nil
}

func checkPolicy(p Policy) error {
	if p > StrictlyIncreasing {
		return &InvalidInputError{Field: "policy", Problem: fmt.Sprintf("is %d, not NonDecreasing or StrictlyIncreasing", uint8(p)), Code: "policy_unknown"}
	}
	return nil
}

func checkProof(proof []byte) error {
	if len(proof) > MaxProofBytes {
		return &InvalidInputError{Field: "proof", Problem: fmt.Sprintf("is %d bytes, more than %d", len(proof), MaxProofBytes), Code: "proof_too_long"}
	}
	return nil
}
