package guard

import (
	"encoding/binary"
	"fmt"
)

// Algorithm is how a verifier key checks proofs (the WIT key-algorithm).
type Algorithm uint8

const (
	// Ed25519: the key is the lock service's 32-byte public key; a verifier cannot make proofs.
	Ed25519 Algorithm = 0
	// HMACSHA256: the key is the shared secret (32 to 64 bytes); whoever holds it can make proofs.
	HMACSHA256 Algorithm = 1
)

// VerifierKey is one key a storage trusts to have made proofs, named by ID.
type VerifierKey struct {
	ID        uint32
	Algorithm Algorithm
	Material  []byte
}

// Keys is the set of keys AdmitSigned checks proofs with (1 to 64, IDs
// distinct). The component checks them when a Guard first uses them: a bad
// set is an InvalidInputError there. Rotating keys is making new Keys.
type Keys struct{ keys []VerifierKey }

// NewKeys copies keys into a Keys.
func NewKeys(keys ...VerifierKey) *Keys {
	k := &Keys{keys: make([]VerifierKey, len(keys))}
	for i, key := range keys {
		k.keys[i] = VerifierKey{ID: key.ID, Algorithm: key.Algorithm, Material: append([]byte(nil), key.Material...)}
	}
	return k
}

var keyErrors = [...]string{"no keys given", "more than 64 keys", "two keys have id %d", "key %d is not a key of its algorithm"}

// AdmitSigned decides one signed write: proof (the grant's fencing_proof,
// as bytes) must show that the lock service granted presented.Token for
// presented.Lock, under one of keys; then the write is decided as Admit
// decides it. A proof that does not hold is a Decision with a Proof*
// verdict, whatever the token.
func (g *Guard) AdmitSigned(current *Fence, presented Sequencer, proof []byte, keys *Keys, policy Policy) (Decision, error) {
	if err := checkPolicy(policy); err != nil {
		return Decision{}, err
	}
	if keys == nil {
		return Decision{}, &InvalidInputError{Field: "keys", Problem: "is nil"}
	}
	for _, k := range keys.keys {
		if k.Algorithm > HMACSHA256 {
			return Decision{}, &InvalidInputError{Field: "keys", Problem: fmt.Sprintf("key %d has unknown algorithm %d", k.ID, k.Algorithm)}
		}
	}
	if err := checkProof(proof); err != nil {
		return Decision{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c, fenceRep, rep, err := g.reps(current, presented.Lock, "presented.Lock")
	if err != nil {
		return Decision{}, err
	}
	if c.keys != keys {
		refused, kase, id, err := c.setKeys(keys.keys)
		if err != nil {
			return Decision{}, g.failed(err)
		}
		if refused {
			return Decision{}, &InvalidInputError{Field: "keys", Problem: "refused: " + fmt.Sprintf(keyErrors[kase], id)}
		}
		c.keys = keys
	}
	code, err := c.admitSigned(current, fenceRep, rep, presented, proof, policy)
	if err != nil {
		return Decision{}, g.failed(err)
	}
	switch Verdict(code) {
	case ProofMissing, ProofMalformed, ProofBad:
		return Decision{Verdict: Verdict(code)}, nil
	case ProofUnknownKey:
		if len(proof) < 5 {
			return Decision{}, g.failed(&ModuleError{Cause: "proof_unknown_key for a proof that names no key"})
		}
		return Decision{Verdict: ProofUnknownKey, KeyID: binary.BigEndian.Uint32(proof[1:5])}, nil
	}
	d, err := decision(code, current, presented.Token, presented.Sequence)
	return d, g.failed(err)
}
