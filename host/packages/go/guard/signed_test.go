package guard

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// proofFile is a file of tests/vectors/proofs (tests/vectors/README.md, "Proofs").
type proofFile struct {
	Keys map[string]struct {
		ID        uint32 `json:"id"`
		Algorithm string `json:"algorithm"`
		Material  string `json:"material"`
	} `json:"keys"`
	Cases []struct {
		Name      string       `json:"name"`
		Policy    string       `json:"policy"`
		Verifier  []string     `json:"verifier"`
		Fence     *vectorFence `json:"fence"`
		Sequencer *vectorFence `json:"sequencer"`
		Proof     struct {
			Hex string `json:"hex"`
		} `json:"proof"`
		Expect struct {
			Verdict   string `json:"verdict"`
			HighWater uint64 `json:"high_water"`
			Sequence  optU64 `json:"sequence"`
			NewTerm   bool   `json:"new_term"`
			Presented uint64 `json:"presented"`
			KeyID     uint32 `json:"key_id"`
		} `json:"expect"`
	} `json:"cases"`
}

func readProofs(t *testing.T) []proofFile {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "tests", "vectors", "proofs", "*.json"))
	if len(files) == 0 {
		t.Fatal("no proof vectors")
	}
	var out []proofFile
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f proofFile
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, f)
	}
	return out
}

func keysOf(t *testing.T, f proofFile, names []string) *Keys {
	var keys []VerifierKey
	for _, n := range names {
		k := f.Keys[n]
		material, err := hex.DecodeString(k.Material)
		if err != nil {
			t.Fatal(err)
		}
		alg := Ed25519
		if k.Algorithm == "hmac-sha256" {
			alg = HMACSHA256
		}
		keys = append(keys, VerifierKey{ID: k.ID, Algorithm: alg, Material: material})
	}
	return NewKeys(keys...)
}

func TestEveryProofVector(t *testing.T) {
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	n := 0
	for _, f := range readProofs(t) {
		for _, c := range f.Cases {
			proof, _ := hex.DecodeString(c.Proof.Hex)
			var fence *Fence
			if c.Fence != nil {
				fence = &Fence{Lock: c.Fence.Lock, HighWater: c.Fence.HighWater, Sequence: c.Fence.Sequence.seq()}
			}
			s := Sequencer{Lock: c.Sequencer.Lock, Token: c.Sequencer.HighWater, Sequence: c.Sequencer.Sequence.seq()}
			d, err := g.AdmitSigned(fence, s, proof, keysOf(t, f, c.Verifier), policyNamed(t, c.Policy))
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			e := c.Expect
			got := d.Verdict.String()
			if d.Admitted() {
				got = "admitted" // the vectors say new_term beside it
			}
			if got != e.Verdict {
				t.Fatalf("%s: %v, want %s", c.Name, d.Verdict, e.Verdict)
			}
			switch d.Verdict {
			case Admitted, AdmittedNewTerm:
				if d.HighWater != e.HighWater || d.Sequence != e.Sequence.seq() || d.NewTerm() != e.NewTerm {
					t.Fatalf("%s: %+v, want %+v", c.Name, d, e)
				}
			case StaleToken:
				if d.Presented != e.Presented || d.HighWater != e.HighWater {
					t.Fatalf("%s: %+v, want %+v", c.Name, d, e)
				}
			case ProofUnknownKey:
				if d.KeyID != e.KeyID {
					t.Fatalf("%s: key %d, want %d", c.Name, d.KeyID, e.KeyID)
				}
			}
			n++
		}
	}
	if n < 20 {
		t.Fatalf("%d proof cases", n)
	}
}

func TestKeysTheComponentRefuses(t *testing.T) {
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s := Sequencer{Lock: "orders", Token: 34}
	mac := func(id uint32, n int) VerifierKey {
		return VerifierKey{ID: id, Algorithm: HMACSHA256, Material: make([]byte, n)}
	}
	for _, c := range []struct {
		keys *Keys
		says string
	}{
		{NewKeys(mac(3, 16)), "key 3 is not a key of its algorithm"},
		{NewKeys(mac(1, 32), mac(1, 32)), "two keys have id 1"},
		{NewKeys(), "no keys given"},
		{NewKeys(VerifierKey{ID: 1, Algorithm: 7, Material: make([]byte, 32)}), "unknown algorithm"},
		{nil, "is nil"},
	} {
		_, err := g.AdmitSigned(nil, s, nil, c.keys, NonDecreasing)
		var bad *InvalidInputError
		if !errors.As(err, &bad) || !strings.Contains(bad.Error(), c.says) {
			t.Fatalf("%v, want an InvalidInputError saying %q", err, c.says)
		}
	}
	d, err := g.AdmitSigned(nil, s, nil, NewKeys(mac(1, 32)), NonDecreasing)
	if err != nil || d.Verdict != ProofMissing {
		t.Fatalf("after refused keys, good ones: %+v %v", d, err)
	}
}
