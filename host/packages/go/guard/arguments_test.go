package guard

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The shared argument vectors (tests/vectors/arguments, format in
// tests/vectors/README.md) through the package's own entry points: it must
// refuse exactly the cases the file refuses, with an *InvalidInputError whose
// Code is the rule's (and ends its text), and take every other one.
//
// What the package takes, and so which cases run:
//   - name: every case, the text ones and the bytes_hex ones (a Go string is
//     bytes), as the lock of a fence, of a sequencer, of a batch and of a
//     signed write, and through CheckName;
//   - policy: skipped: a policy is a Policy constant, never text;
//   - number: tokens are uint64, never text: the ok cases run as their value
//     (every u64 is a token); the refusals are about text and are skipped;
//   - from_signed, to_signed: skipped: nothing here is a signed 64-bit integer;
//   - proof: proofs are bytes. A case whose text is hex runs as its bytes
//     (ok, or proof_too_long past 256 bytes); proof_not_hex cases are about
//     text and are skipped.

type argumentCase struct {
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Text     *string         `json:"text"`
	Repeat   int             `json:"repeat"`
	BytesHex *string         `json:"bytes_hex"`
	Value    json.RawMessage `json:"value"`
	Expect   string          `json:"expect"`
}

func (c argumentCase) input(t *testing.T) string {
	if c.BytesHex != nil {
		b, err := hex.DecodeString(*c.BytesHex)
		if err != nil {
			t.Fatalf("%s: bytes_hex: %v", c.Name, err)
		}
		return string(b)
	}
	return strings.Repeat(*c.Text, max(c.Repeat, 1))
}

var digits = regexp.MustCompile(`^[0-9]+$`)

// skipped says why the package does not take c, or "".
func (c argumentCase) skipped() string {
	switch c.Kind {
	case "name":
		return ""
	case "number":
		if c.Expect == "ok" {
			return ""
		}
		return "a token is a uint64, never text"
	case "proof":
		if c.Expect == "proof_not_hex" {
			return "a proof is bytes, never hex"
		}
		return ""
	case "policy":
		return "a policy is a Policy constant, never text"
	}
	return "nothing here is a signed 64-bit integer"
}

func readArguments(t *testing.T) []argumentCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "tests", "vectors", "arguments", "arguments.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []argumentCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	return file.Cases
}

// refusedWith fails t unless err is the rule's refusal with code.
func refusedWith(t *testing.T, name, where string, err error, code string) {
	t.Helper()
	var bad *InvalidInputError
	if !errors.As(err, &bad) || bad.Code != code || !strings.HasSuffix(err.Error(), "("+code+")") {
		t.Errorf("%s (%s): %v, want the refusal %s", name, where, err, code)
	}
}

func TestArgumentVectors(t *testing.T) {
	g := testGuard(t) // a refused name is never interned: each entry point checks it again
	keys := NewKeys(VerifierKey{ID: 1, Algorithm: HMACSHA256, Material: make([]byte, 32)})
	ran, skipped := 0, map[string]int{}
	for _, c := range readArguments(t) {
		if why := c.skipped(); why != "" {
			skipped[c.Kind]++
			continue
		}
		ran++
		switch c.Kind {
		case "name":
			name := c.input(t)
			calls := map[string]func() error{
				"CheckName": func() error { return CheckName(name) },
				"presented": func() error {
					_, err := g.Admit(nil, Sequencer{Lock: name, Token: 1}, NonDecreasing)
					return err
				},
				"fence": func() error {
					_, err := g.Admit(&Fence{Lock: name, HighWater: 1}, Sequencer{Lock: "other", Token: 2}, NonDecreasing)
					return err
				},
				"batch": func() error {
					_, err := g.AdmitBatch(&Fence{Lock: "other", HighWater: 1}, name, []Write{{Token: 2}}, NonDecreasing)
					return err
				},
				"signed": func() error {
					_, err := g.AdmitSigned(nil, Sequencer{Lock: name, Token: 1}, nil, keys, NonDecreasing)
					return err
				},
			}
			for where, call := range calls {
				if err := call(); c.Expect == "ok" && err != nil {
					t.Errorf("%s (%s): %v", c.Name, where, err)
				} else if c.Expect != "ok" {
					refusedWith(t, c.Name, where, err, c.Expect)
				}
			}
			if c.Expect == "ok" {
				d, err := g.Admit(&Fence{Lock: name, HighWater: 1}, Sequencer{Lock: name, Token: 1}, NonDecreasing)
				if err != nil || d.Verdict != Admitted {
					t.Errorf("%s: the name's own fence: %+v, %v", c.Name, d, err)
				}
			}
		case "number":
			v, err := strconv.ParseUint(string(c.Value), 10, 64)
			if err != nil || !digits.MatchString(c.input(t)) {
				t.Fatalf("%s: value %s: %v", c.Name, c.Value, err)
			}
			d, err := g.Admit(&Fence{Lock: "l", HighWater: v}, Sequencer{Lock: "l", Token: v, Sequence: Seq(v)}, NonDecreasing)
			if want := map[bool]Verdict{true: InvalidToken, false: Admitted}[v == 0]; err != nil || d.Verdict != want {
				t.Errorf("%s: %+v, %v", c.Name, d, err)
			}
		case "proof":
			proof, err := hex.DecodeString(c.input(t))
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			d, err := g.AdmitSigned(nil, Sequencer{Lock: "l", Token: 1}, proof, keys, NonDecreasing)
			if c.Expect != "ok" {
				refusedWith(t, c.Name, "AdmitSigned", err, c.Expect)
			} else if err != nil || (d.Verdict != ProofMissing && d.Verdict != ProofMalformed) {
				// Taken: the proof is the component's to judge (empty: missing; these bytes: not a proof).
				t.Errorf("%s: %+v, %v", c.Name, d, err)
			}
		}
	}
	t.Logf("argument vectors: %d ran, skipped %v", ran, skipped)
	if ran < 30 {
		t.Fatalf("only %d argument vectors ran", ran)
	}
}
