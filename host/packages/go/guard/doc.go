// Package guard decides fencing-token writes in Go, with the rules of the
// fencing:guard@0.3.0 WebAssembly component: the same bytes every fencing
// host runs, so a Go service refuses exactly the writes the reference
// server, the PostgreSQL and SQLite extensions and the other language
// packages refuse.
//
// The component's core module runs on wazero (pure Go, no cgo), compiled
// once per process; the canonical ABI is lowered and lifted here by hand,
// as docs/core-abi.md in the repository states it. A single decision is one
// call with scalar arguments (admit-code) and a scalar answer.
//
//	g, err := guard.New()
//	d, err := g.Admit(&guard.Fence{Lock: "orders", HighWater: 34}, guard.Sequencer{Lock: "orders", Token: 33}, guard.NonDecreasing)
//	// d.Verdict == guard.StaleToken, d.Presented == 33, d.HighWater == 34
//
// Refusals are values (a Decision with its evidence), never errors. An
// error means the call could not be decided (a value the hosts' rules
// refuse, an *InvalidInputError naming the rule's Code; a module that broke
// its contract): refuse the write.
//
// Values are u64 as in the contract: tokens, sequences and high-water marks
// are uint64 end to end, so nothing is narrowed or wrapped. Lock names are
// compared as their bytes (the NFC and NFD forms of one text are two locks).
//
// A Guard is safe for concurrent use; its calls take turns on one instance.
// For parallel decisions make one Guard per goroutine (instances share the
// compiled module and cost about a hundred kilobytes each).
//
// Layout:
//   - component.go: the embedded component and how its core module is found;
//   - core.go: one instance of the core module, lock names interned in it,
//     and the calls with their results read from guest memory;
//   - decision.go: the values (fences, sequencers, decisions, verdicts) and
//     how a verdict code becomes a decision with its evidence;
//   - accept.go: what the package accepts (names, policies, proofs), the hosts' rules;
//   - guard.go: the API, validation, and replacing a broken instance.
//
// The component is embedded from fencing_guard.wasm, committed in this
// folder: a copy of the repository's guest/fencing_guard.wasm, since go:embed
// reaches no file outside the package's folder. The repository's
// scripts/build-component writes both and its --check (in CI) fails when
// they differ from each other or from a fresh build of the rules, so the
// module builds with `go get` alone, no Rust and no script.
package guard
