package guard

import "fmt"

// Policy is how a token equal to the high-water mark is treated (the WIT
// policy enum; its value is the case index).
type Policy uint8

const (
	// NonDecreasing admits the holder of the current token again.
	NonDecreasing Policy = 0
	// StrictlyIncreasing admits each token once.
	StrictlyIncreasing Policy = 1
)

func (p Policy) String() string {
	switch p {
	case NonDecreasing:
		return "non_decreasing"
	case StrictlyIncreasing:
		return "strictly_increasing"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Sequence is an optional u64: a holder's numbering of its writes within one token.
type Sequence struct {
	Value uint64
	Valid bool
}

// Seq is the sequence n.
func Seq(n uint64) Sequence { return Sequence{Value: n, Valid: true} }

// Fence is what a resource stores: the lock it is bound to, the highest
// token admitted, and the last sequence admitted under that token.
type Fence struct {
	Lock      string
	HighWater uint64
	Sequence  Sequence
}

// Sequencer is what a writer presents: the lock, its token, and optionally
// its write's sequence within that token.
type Sequencer struct {
	Lock     string
	Token    uint64
	Sequence Sequence
}

// Write is one write of a batch (the lock is the batch's).
type Write struct {
	Token    uint64
	Sequence Sequence
}

// Verdict is the WIT verdict-code: what was decided.
type Verdict uint8

const (
	Admitted          Verdict = 0  // the token equals the mark (same term)
	AdmittedNewTerm   Verdict = 1  // the token is above the mark, or the first
	InvalidToken      Verdict = 2  // token 0
	WrongLock         Verdict = 3  // the fence is bound to another lock
	StaleToken        Verdict = 4  // the token is below the mark
	TokenReused       Verdict = 5  // the mark again, under StrictlyIncreasing
	SequenceRegressed Verdict = 6  // the mark's token with a sequence not above the last
	ProofNoKeys       Verdict = 7  // AdmitSigned only: no keys installed (never returned: keys go in first)
	ProofMissing      Verdict = 8  // AdmitSigned only: the write carries no proof
	ProofMalformed    Verdict = 9  // AdmitSigned only: not a proof of this format
	ProofUnknownKey   Verdict = 10 // AdmitSigned only: the proof names a key not held (KeyID)
	ProofBad          Verdict = 11 // AdmitSigned only: not made for this lock and token by its key
)

var verdictNames = [...]string{"admitted", "admitted_new_term", "invalid_token", "wrong_lock", "stale_token", "token_reused", "sequence_regressed",
	"proof_no_keys", "proof_missing", "proof_malformed", "proof_unknown_key", "proof_bad"}

// String is the reason name the HTTP API and the metrics use.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Decision is one write's verdict with its evidence. Which fields mean
// something depends on the verdict:
//   - Admitted, AdmittedNewTerm: HighWater and Sequence are the fence to
//     store (with the presented lock);
//   - StaleToken, TokenReused: Presented is the token, HighWater the mark;
//   - SequenceRegressed: Token is the token, Sequence the presented
//     sequence, Last the fence's last sequence;
//   - InvalidToken, WrongLock: no evidence;
//   - ProofUnknownKey: KeyID, the key the proof names; the other proof
//     verdicts: no evidence.
type Decision struct {
	Verdict   Verdict
	HighWater uint64
	Sequence  Sequence
	Presented uint64
	Token     uint64
	Last      uint64
	KeyID     uint32
}

// Admitted reports whether the write may be applied.
func (d Decision) Admitted() bool { return d.Verdict == Admitted || d.Verdict == AdmittedNewTerm }

// NewTerm reports whether an admission began a new term (a higher token).
func (d Decision) NewTerm() bool { return d.Verdict == AdmittedNewTerm }

// ModuleError is a module that broke the contract (a trap, a bad pointer, a
// code its inputs cannot produce): the write could not be decided and must
// be refused. The Guard replaces the instance.
type ModuleError struct{ Cause string }

func (e *ModuleError) Error() string { return "guard: the module failed: " + e.Cause }

// decision is what code means for the write (token, sequence) decided
// against fence (nil: none; its lock is not consulted). A code these numbers
// cannot produce is a ModuleError: the call fails closed.
func decision(code uint64, fence *Fence, token uint64, seq Sequence) (Decision, error) {
	impossible := func() (Decision, error) {
		return Decision{}, &ModuleError{Cause: fmt.Sprintf("verdict code %d, which these inputs cannot produce", code)}
	}
	v := Verdict(code)
	switch {
	case code > uint64(SequenceRegressed):
		return Decision{}, &ModuleError{Cause: fmt.Sprintf("unknown verdict code %d", code)}
	case v == InvalidToken:
		if token != 0 {
			return impossible()
		}
		return Decision{Verdict: v}, nil
	case token == 0:
		return impossible()
	case v == AdmittedNewTerm:
		if fence != nil && token <= fence.HighWater {
			return impossible()
		}
		return Decision{Verdict: v, HighWater: token, Sequence: seq}, nil
	case fence == nil:
		return impossible()
	}
	switch v {
	case Admitted:
		if token != fence.HighWater {
			return impossible()
		}
		return Decision{Verdict: v, HighWater: token, Sequence: seq}, nil
	case WrongLock:
		return Decision{Verdict: v}, nil
	case StaleToken:
		if token >= fence.HighWater {
			return impossible()
		}
		return Decision{Verdict: v, Presented: token, HighWater: fence.HighWater}, nil
	case TokenReused:
		if token != fence.HighWater {
			return impossible()
		}
		return Decision{Verdict: v, Presented: token, HighWater: fence.HighWater}, nil
	default: // SequenceRegressed
		if token != fence.HighWater || !fence.Sequence.Valid {
			return impossible()
		}
		return Decision{Verdict: v, Token: token, Sequence: seq, Last: fence.Sequence.Value}, nil
	}
}
