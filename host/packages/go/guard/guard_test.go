package guard

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

func testGuard(t testing.TB, options ...Option) *Guard {
	t.Helper()
	g, err := New(options...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func TestAPausedHoldersLateWriteIsRefusedWithItsEvidence(t *testing.T) {
	g := testGuard(t)
	fence := &Fence{Lock: "orders", HighWater: 34}
	d, err := g.Admit(fence, Sequencer{Lock: "orders", Token: 33}, NonDecreasing)
	if err != nil || d.Verdict != StaleToken || d.Presented != 33 || d.HighWater != 34 || d.Admitted() {
		t.Fatalf("token 33 against 34: %+v, %v", d, err)
	}
	d, err = g.Admit(fence, Sequencer{Lock: "orders", Token: 35, Sequence: Seq(1)}, NonDecreasing)
	if err != nil || !d.Admitted() || !d.NewTerm() || d.HighWater != 35 || d.Sequence != Seq(1) {
		t.Fatalf("token 35: %+v, %v", d, err)
	}
	d, _ = g.Admit(fence, Sequencer{Lock: "payments", Token: 35}, NonDecreasing)
	if d.Verdict != WrongLock {
		t.Fatalf("another lock: %+v", d)
	}
	d, _ = g.Admit(nil, Sequencer{Lock: "orders", Token: 0}, NonDecreasing)
	if d.Verdict != InvalidToken {
		t.Fatalf("token 0: %+v", d)
	}
}

func TestTokensAreU64EndToEnd(t *testing.T) {
	g := testGuard(t)
	top := uint64(math.MaxUint64)
	d, err := g.Admit(&Fence{Lock: "l", HighWater: top - 1}, Sequencer{Lock: "l", Token: top}, StrictlyIncreasing)
	if err != nil || !d.NewTerm() || d.HighWater != top {
		t.Fatalf("2^64-1 over 2^64-2: %+v, %v", d, err)
	}
	d, _ = g.Admit(&Fence{Lock: "l", HighWater: top}, Sequencer{Lock: "l", Token: 1 << 63}, NonDecreasing)
	if d.Verdict != StaleToken || d.Presented != 1<<63 || d.HighWater != top {
		t.Fatalf("2^63 under 2^64-1 (an i64 would read it as negative): %+v", d)
	}
	out, err := g.AdmitStream(top-2, []uint64{top - 3, top - 1, top}, StrictlyIncreasing)
	if err != nil || out.HighWater != top || fmt.Sprint(out.Verdicts) != "[stale_token admitted admitted]" {
		t.Fatalf("stream near 2^64: %+v, %v", out, err)
	}
}

func TestBadInputIsAnErrorNamingTheValue(t *testing.T) {
	g := testGuard(t)
	var bad *InvalidInputError
	_, err := g.Admit(nil, Sequencer{Lock: "caf\xe9", Token: 1}, NonDecreasing)
	if !errors.As(err, &bad) || bad.Field != "presented.Lock" || bad.Code != "name_not_utf8" {
		t.Fatalf("a name that is not UTF-8: %v", err)
	}
	_, err = g.Admit(&Fence{Lock: "\xff", HighWater: 1}, Sequencer{Lock: "a", Token: 1}, NonDecreasing)
	if !errors.As(err, &bad) || bad.Field != "current.Lock" {
		t.Fatalf("a fence lock that is not UTF-8: %v", err)
	}
	_, err = g.AdmitBatch(nil, "a", []Write{{Token: 1}}, Policy(2))
	if !errors.As(err, &bad) || bad.Field != "policy" || bad.Code != "policy_unknown" {
		t.Fatalf("an unknown policy: %v", err)
	}
	// The Guard still decides afterwards.
	if d, err := g.Admit(nil, Sequencer{Lock: "a", Token: 1}, NonDecreasing); err != nil || !d.Admitted() {
		t.Fatalf("after bad input: %+v, %v", d, err)
	}
	if err := WithMaxLocks(1)(&Guard{}); err == nil {
		t.Fatal("WithMaxLocks(1) accepted")
	}
}

func TestNamesCompareAsBytes(t *testing.T) {
	g := testGuard(t)
	d, _ := g.Admit(&Fence{Lock: "caf\u00e9", HighWater: 2}, Sequencer{Lock: "cafe\u0301", Token: 3}, NonDecreasing)
	if d.Verdict != WrongLock {
		t.Fatalf("NFC and NFD forms are two locks: %+v", d)
	}
}

func TestManyNamesKeepBoundedInterningAndRightAnswers(t *testing.T) {
	g := testGuard(t, WithMaxLocks(8))
	for i := range 1000 {
		lock := fmt.Sprintf("lock-%d", i)
		d, err := g.Admit(&Fence{Lock: lock, HighWater: 10}, Sequencer{Lock: lock, Token: uint64(9 + i%3)}, NonDecreasing)
		want := []Verdict{StaleToken, Admitted, AdmittedNewTerm}[i%3]
		if err != nil || d.Verdict != want {
			t.Fatalf("%s: %+v, %v (want %v)", lock, d, err, want)
		}
		if n := len(g.core.locks); n > 8 {
			t.Fatalf("%d names interned over a bound of 8", n)
		}
	}
}

func TestAGuardIsSafeForConcurrentUse(t *testing.T) {
	g := testGuard(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock := fmt.Sprintf("w%d", w)
			for i := range uint64(2000) {
				d, err := g.Admit(&Fence{Lock: lock, HighWater: 1000}, Sequencer{Lock: lock, Token: i}, NonDecreasing)
				want := map[bool]Verdict{true: StaleToken, false: Admitted}[i < 1000]
				if i == 0 {
					want = InvalidToken
				} else if i > 1000 {
					want = AdmittedNewTerm
				}
				if err != nil || d.Verdict != want {
					errs <- fmt.Errorf("%s token %d: %+v, %v (want %v)", lock, i, d, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestAComponentIsCheckedBeforeItRuns(t *testing.T) {
	if _, err := NewWithComponent([]byte("\x00asm\x01\x00\x00\x00")); err == nil {
		t.Fatal("a core module was taken for a component")
	}
	modules, err := coreModules(component)
	if err != nil {
		t.Fatal(err)
	}
	// The component again with its implementing module twice: refused, as the contract says.
	var twice []byte
	twice = append(twice, component...)
	for _, m := range modules {
		if has, _ := exports(m, iface+"#admit-code"); has {
			twice = append(twice, 1)
			twice = appendLEB(twice, uint32(len(m)))
			twice = append(twice, m...)
		}
	}
	if _, err := NewWithComponent(twice); err == nil || !strings.Contains(err.Error(), "found 2") {
		t.Fatalf("two implementing modules: %v", err)
	}
	if _, err := NewWithComponent(component[:len(component)/2]); err == nil {
		t.Fatal("a truncated component was accepted")
	}
}

func TestCodesTheInputsCannotProduceFailClosed(t *testing.T) {
	fence := &Fence{HighWater: 5}
	for _, c := range []struct {
		code  uint64
		fence *Fence
		token uint64
	}{
		{uint64(StaleToken), fence, 6}, // stale above the mark
		{uint64(Admitted), nil, 5},     // admitted equal without a fence
		{uint64(AdmittedNewTerm), fence, 5},
		{uint64(WrongLock), nil, 5},      // wrong lock without a fence
		{uint64(InvalidToken), fence, 5}, // invalid with a valid token
		{uint64(Admitted), fence, 0},     // token 0 admitted
		{uint64(SequenceRegressed), fence, 5},
		{7, fence, 5},
	} {
		var m *ModuleError
		if _, err := decision(c.code, c.fence, c.token, Sequence{}); !errors.As(err, &m) {
			t.Errorf("code %d for token %d against %+v: %v", c.code, c.token, c.fence, err)
		}
	}
}

func appendLEB(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func TestANameTheRuleRefusesIsRefusedWhereverItIsGiven(t *testing.T) {
	// A NUL inside a name is refused, never compared or truncated at: as the
	// fence's lock, the presented lock and a batch's lock, every time (a
	// refused name is never interned, so it is checked again).
	g := testGuard(t)
	calls := []func(name string) error{
		func(n string) error {
			_, err := g.Admit(&Fence{Lock: n, HighWater: 1}, Sequencer{Lock: "a", Token: 2}, NonDecreasing)
			return err
		},
		func(n string) error {
			_, err := g.Admit(&Fence{Lock: "a", HighWater: 1}, Sequencer{Lock: n, Token: 2}, NonDecreasing)
			return err
		},
		func(n string) error {
			_, err := g.AdmitBatch(nil, n, []Write{{Token: 1}}, NonDecreasing)
			return err
		},
		func(n string) error {
			_, err := g.AdmitSigned(nil, Sequencer{Lock: n, Token: 1}, nil, NewKeys(VerifierKey{ID: 1, Algorithm: HMACSHA256, Material: make([]byte, 32)}), NonDecreasing)
			return err
		},
	}
	for round := 0; round < 2; round++ {
		for i, call := range calls {
			var bad *InvalidInputError
			err := call("a\x00b")
			if !errors.As(err, &bad) || bad.Code != "name_control" || !strings.HasSuffix(err.Error(), "contains control character U+0000 (name_control)") {
				t.Fatalf("call %d, round %d: %v", i, round, err)
			}
		}
	}
	if err := CheckName("a b"); err != nil {
		t.Fatal(err)
	}
	if err := CheckName("\u00a0a"); err == nil || !strings.HasSuffix(err.Error(), "(name_whitespace)") {
		t.Fatalf("a leading no-break space: %v", err)
	}
}
