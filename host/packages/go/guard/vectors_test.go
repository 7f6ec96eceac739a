package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The shared vectors (tests/vectors/README.md) through this package's API:
// every case must give exactly the verdict and evidence written there. With
// FENCING_RANDOM_VECTORS set to a directory of files written by
// `fencing check --random N`, those cases run too (scripts/test-go: 10,000,
// each expecting the native Rust rules' verdict).
//
// The contract takes any string as a lock name; the package takes the names
// the hosts' name rule accepts (CheckName). A case whose lock names that rule
// refuses (the empty name, edge white space, more than 256 characters, a NUL
// byte in a random case) must be refused with the rule's code, as every host
// refuses it, instead of decided.

type vectorFile struct {
	Description string       `json:"description"`
	Cases       []vectorCase `json:"cases"`
}

type optU64 struct {
	Value uint64
	Valid bool
}

func (o *optU64) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = optU64{}
		return nil
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("not a u64: %s", b)
	}
	*o = optU64{v, true}
	return nil
}

func (o optU64) seq() Sequence { return Sequence{Value: o.Value, Valid: o.Valid} }

type vectorFence struct {
	Lock      string `json:"lock"`
	HighWater uint64 `json:"high_water"`
	Sequence  optU64 `json:"sequence"`
}

type vectorCase struct {
	Name      string          `json:"name"`
	Kind      string          `json:"kind"`
	Policy    string          `json:"policy"`
	Fence     *vectorFence    `json:"fence"`
	Sequencer *vectorFence    `json:"sequencer"`
	Lock      string          `json:"lock"`
	Writes    []vectorWrite   `json:"writes"`
	HighWater uint64          `json:"high_water"`
	Tokens    []uint64        `json:"tokens"`
	Expect    json.RawMessage `json:"expect"`
}

type vectorWrite struct {
	Token    uint64 `json:"token"`
	Sequence optU64 `json:"sequence"`
}

// The sequencer shares the fence's shape, with token in place of high_water.
func (f *vectorFence) UnmarshalJSON(b []byte) error {
	var raw struct {
		Lock      string  `json:"lock"`
		HighWater *uint64 `json:"high_water"`
		Token     *uint64 `json:"token"`
		Sequence  optU64  `json:"sequence"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&raw); err != nil {
		return err
	}
	f.Lock, f.Sequence = raw.Lock, raw.Sequence
	switch {
	case raw.HighWater != nil && raw.Token == nil:
		f.HighWater = *raw.HighWater
	case raw.Token != nil && raw.HighWater == nil:
		f.HighWater = *raw.Token
	default:
		return fmt.Errorf("a fence has high_water, a sequencer token: %s", b)
	}
	return nil
}

func policyNamed(t *testing.T, name string) Policy {
	switch name {
	case "non_decreasing":
		return NonDecreasing
	case "strictly_increasing":
		return StrictlyIncreasing
	}
	t.Fatalf("unknown policy %q", name)
	return 0
}

func readVectors(t *testing.T, dir string) []vectorCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vector files in %s (%v)", dir, err)
	}
	sort.Strings(files)
	var cases []vectorCase
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f vectorFile
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		cases = append(cases, f.Cases...)
	}
	return cases
}

func u64(v uint64) json.Number { return json.Number(strconv.FormatUint(v, 10)) }

func seqJSON(s Sequence) any {
	if !s.Valid {
		return nil
	}
	return u64(s.Value)
}

// verdictJSON is d in the vectors' vocabulary.
func verdictJSON(d Decision) map[string]any {
	out := map[string]any{"verdict": d.Verdict.String()}
	switch d.Verdict {
	case Admitted, AdmittedNewTerm:
		out["verdict"] = "admitted"
		out["high_water"], out["sequence"], out["new_term"] = u64(d.HighWater), seqJSON(d.Sequence), d.NewTerm()
	case StaleToken, TokenReused:
		out["presented"], out["high_water"] = u64(d.Presented), u64(d.HighWater)
	case SequenceRegressed:
		out["token"], out["presented"], out["last"] = u64(d.Token), seqJSON(d.Sequence), u64(d.Last)
	}
	return out
}

// canonical re-encodes a JSON value with sorted keys, numbers as written,
// and the optional fields the vectors may leave out filled in.
func canonical(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&generic); err != nil {
		t.Fatal(err)
	}
	fill(generic)
	out, _ := json.Marshal(generic)
	return string(out)
}

func fill(v any) {
	switch x := v.(type) {
	case map[string]any:
		if verdict, ok := x["verdict"].(string); ok {
			if _, has := x["sequence"]; verdict == "admitted" && !has {
				x["sequence"] = nil
			}
			if _, has := x["presented"]; verdict == "sequence_regressed" && !has {
				x["presented"] = nil
			}
		}
		for _, e := range x {
			fill(e)
		}
	case []any:
		for _, e := range x {
			fill(e)
		}
	}
}

func fenceOf(f *vectorFence) *Fence {
	if f == nil {
		return nil
	}
	return &Fence{Lock: f.Lock, HighWater: f.HighWater, Sequence: f.Sequence.seq()}
}

// lockNames are c's lock names in the order a Guard interns them: the fence's, then the presented one.
func lockNames(c vectorCase) []string {
	var names []string
	if c.Fence != nil {
		names = append(names, c.Fence.Lock)
	}
	switch c.Kind {
	case "admit":
		names = append(names, c.Sequencer.Lock)
	case "batch":
		names = append(names, c.Lock)
	}
	return names
}

// refusal is {"refused": code} for the first of c's lock names CheckName refuses, or nil.
func refusal(c vectorCase) any {
	for _, name := range lockNames(c) {
		var bad *InvalidInputError
		if err := CheckName(name); errors.As(err, &bad) {
			return map[string]any{"refused": bad.Code}
		}
	}
	return nil
}

// refused is err as {"refused": code} when the hosts' rules refused an argument.
func refused(t *testing.T, name string, err error) any {
	var bad *InvalidInputError
	if errors.As(err, &bad) && bad.Code != "" && strings.HasSuffix(err.Error(), "("+bad.Code+")") {
		return map[string]any{"refused": bad.Code}
	}
	t.Fatalf("%s: %v", name, err)
	return nil
}

// run decides c with g: its outcome in the vectors' vocabulary.
func run(t *testing.T, g *Guard, c vectorCase) any {
	p := policyNamed(t, c.Policy)
	switch c.Kind {
	case "admit":
		s := Sequencer{Lock: c.Sequencer.Lock, Token: c.Sequencer.HighWater, Sequence: c.Sequencer.Sequence.seq()}
		d, err := g.Admit(fenceOf(c.Fence), s, p)
		if err != nil {
			return refused(t, c.Name, err)
		}
		return verdictJSON(d)
	case "batch":
		writes := make([]Write, len(c.Writes))
		for i, w := range c.Writes {
			writes[i] = Write{Token: w.Token, Sequence: w.Sequence.seq()}
		}
		out, err := g.AdmitBatch(fenceOf(c.Fence), c.Lock, writes, p)
		if err != nil {
			return refused(t, c.Name, err)
		}
		verdicts := make([]any, len(out.Decisions))
		for i, d := range out.Decisions {
			verdicts[i] = verdictJSON(d)
		}
		var fence any
		if out.Fence != nil {
			fence = map[string]any{"high_water": u64(out.Fence.HighWater), "sequence": seqJSON(out.Fence.Sequence)}
		}
		return map[string]any{"verdicts": verdicts, "fence": fence}
	case "stream":
		out, err := g.AdmitStream(c.HighWater, c.Tokens, p)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		verdicts := make([]string, len(out.Verdicts))
		for i, v := range out.Verdicts {
			verdicts[i] = v.String()
		}
		return map[string]any{"verdicts": verdicts, "high_water": u64(out.HighWater)}
	}
	t.Fatalf("%s: unknown kind %q", c.Name, c.Kind)
	return nil
}

func checkAll(t *testing.T, cases []vectorCase) {
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	failed, refusals := 0, 0
	for _, c := range cases {
		want := canonical(t, c.Expect)
		if r := refusal(c); r != nil {
			want = canonical(t, r)
			refusals++
		}
		got := canonical(t, run(t, g, c))
		if got != want {
			failed++
			if failed <= 10 {
				t.Errorf("%s: got %s, want %s", c.Name, got, want)
			}
		}
	}
	t.Logf("%d cases, %d passed (%d by refusing a lock name the hosts' rule refuses), %d failed", len(cases), len(cases)-failed, refusals, failed)
	if refusals == len(cases) {
		t.Fatal("every case was refused")
	}
}

func TestSharedVectors(t *testing.T) {
	cases := readVectors(t, filepath.Join("..", "..", "..", "..", "tests", "vectors"))
	if len(cases) < 100 {
		t.Fatalf("only %d shared cases", len(cases))
	}
	checkAll(t, cases)
}

func TestRandomCasesAgreeWithTheNativeRules(t *testing.T) {
	dir := os.Getenv("FENCING_RANDOM_VECTORS")
	if dir == "" {
		t.Skip("FENCING_RANDOM_VECTORS is not set (scripts/test-go sets it to `fencing check --random` output)")
	}
	checkAll(t, readVectors(t, dir))
}
