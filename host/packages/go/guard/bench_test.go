package guard

import "testing"

// go test -bench . -run '^$': the cost of a decision through the module,
// per call (single) or per element (batch, stream of 1,024).

func BenchmarkAdmitAdmitted(b *testing.B) {
	g := testGuard(b)
	fence := &Fence{Lock: "orders", HighWater: 34}
	s := Sequencer{Lock: "orders", Token: 34}
	for b.Loop() {
		if d, err := g.Admit(fence, s, NonDecreasing); err != nil || !d.Admitted() {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkAdmitRefused(b *testing.B) {
	g := testGuard(b)
	fence := &Fence{Lock: "orders", HighWater: 34}
	s := Sequencer{Lock: "orders", Token: 33}
	for b.Loop() {
		if d, err := g.Admit(fence, s, NonDecreasing); err != nil || d.Verdict != StaleToken {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkBatch1024(b *testing.B) {
	g := testGuard(b)
	writes := make([]Write, 1024)
	for i := range writes {
		writes[i] = Write{Token: uint64(100 + i/4)}
	}
	fence := &Fence{Lock: "orders", HighWater: 100}
	for b.Loop() {
		if _, err := g.AdmitBatch(fence, "orders", writes, NonDecreasing); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1024, "ns/write")
}

func BenchmarkStream1024(b *testing.B) {
	g := testGuard(b)
	tokens := make([]uint64, 1024)
	for i := range tokens {
		tokens[i] = uint64(100 + i/4)
	}
	for b.Loop() {
		if _, err := g.AdmitStream(100, tokens, NonDecreasing); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1024, "ns/token")
}
