package guard

import (
	"errors"
	"fmt"
	"sync"
)

// Guard decides writes with the rules of the fencing:guard component. The
// zero value is not usable: call New.
type Guard struct {
	mu       sync.Mutex
	engine   *engine
	core     *core
	maxLocks int
}

// Option configures a Guard.
type Option func(*Guard) error

// WithMaxLocks keeps at most n lock names interned (at least 2; default
// 4096). Past that the instance is replaced by a fresh one and interning
// starts over, so a service that sees unbounded lock names holds bounded
// memory.
func WithMaxLocks(n int) Option {
	return func(g *Guard) error {
		if n < 2 {
			return fmt.Errorf("guard: WithMaxLocks(%d): at least 2", n)
		}
		g.maxLocks = n
		return nil
	}
}

// New returns a Guard running the embedded component (compiled once per process).
func New(options ...Option) (*Guard, error) {
	e, err := shipped()
	if err != nil {
		return nil, err
	}
	return newGuard(e, options)
}

// NewWithComponent returns a Guard running the rules of another
// fencing:guard@0.3 component (its bytes), compiled for this Guard alone.
func NewWithComponent(componentBytes []byte, options ...Option) (*Guard, error) {
	e, err := newEngine(componentBytes)
	if err != nil {
		return nil, err
	}
	return newGuard(e, options)
}

func newGuard(e *engine, options []Option) (*Guard, error) {
	g := &Guard{engine: e, maxLocks: 4096}
	for _, o := range options {
		if err := o(g); err != nil {
			return nil, err
		}
	}
	c, err := newCore(e)
	if err != nil {
		return nil, err
	}
	g.core = c
	return g, nil
}

// Close frees the Guard's instance. It is not usable afterwards.
func (g *Guard) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.core != nil {
		g.core.close()
		g.core = nil
	}
	return nil
}

// ErrClosed is returned by a Guard after Close.
var ErrClosed = errors.New("guard: closed")

// InvalidInputError names the value the call could not take and, when one
// of the hosts' rules refused it (accept.go), the rule's Code
// (name_control, ...), with which its text ends.
type InvalidInputError struct {
	Field   string
	Problem string
	Code    string
}

func (e *InvalidInputError) Error() string {
	if e.Code == "" {
		return "guard: " + e.Field + " " + e.Problem
	}
	return "guard: " + e.Field + " " + e.Problem + " (" + e.Code + ")"
}

// ready returns the instance, starting a fresh one after a failure.
func (g *Guard) ready() (*core, error) {
	if g.core != nil {
		return g.core, nil
	}
	if g.engine == nil {
		return nil, ErrClosed
	}
	c, err := newCore(g.engine)
	if err != nil {
		return nil, err
	}
	g.core = c
	return c, nil
}

// failed drops an instance whose call failed: its memory may be inconsistent.
func (g *Guard) failed(err error) error {
	var m *ModuleError
	if errors.As(err, &m) && g.core != nil {
		g.core.close()
		g.core = nil
	}
	return err
}

// reps interns the fence's lock (rep 0 without a fence) and lock in one
// instance. A name is checked when the instance first sees it: an interned
// name was checked then, and is not checked again.
func (g *Guard) reps(current *Fence, lock, field string) (*core, uint32, uint32, error) {
	for attempt := 0; ; attempt++ {
		c, err := g.ready()
		if err != nil {
			return nil, 0, 0, err
		}
		fresh := 0
		if current != nil {
			if _, ok := c.locks[current.Lock]; !ok {
				if err := checkName(current.Lock, "current.Lock"); err != nil {
					return nil, 0, 0, err
				}
				fresh++
			}
		}
		if _, ok := c.locks[lock]; !ok {
			if err := checkName(lock, field); err != nil {
				return nil, 0, 0, err
			}
			fresh++
		}
		if fresh > 0 && len(c.locks)+fresh > g.maxLocks && attempt == 0 {
			c.close()
			g.core = nil
			continue
		}
		var fenceRep uint32
		if current != nil {
			if fenceRep, err = c.lock(current.Lock); err != nil {
				return nil, 0, 0, g.failed(err)
			}
		}
		rep, err := c.lock(lock)
		if err != nil {
			return nil, 0, 0, g.failed(err)
		}
		return c, fenceRep, rep, nil
	}
}

// Admit decides one write against the resource's fence (nil: none yet). A
// refusal is a Decision, not an error.
func (g *Guard) Admit(current *Fence, presented Sequencer, policy Policy) (Decision, error) {
	if err := checkPolicy(policy); err != nil {
		return Decision{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c, fenceRep, rep, err := g.reps(current, presented.Lock, "presented.Lock")
	if err != nil {
		return Decision{}, err
	}
	code, err := c.admitCode(current, fenceRep, rep, presented, policy)
	if err != nil {
		return Decision{}, g.failed(err)
	}
	d, err := decision(code, current, presented.Token, presented.Sequence)
	return d, g.failed(err)
}

// BatchOutcome is a batch's verdicts, in order, and the numeric fence after
// it (nil when there was none and nothing was admitted; its Lock is empty:
// the batch's lock is the one to store).
type BatchOutcome struct {
	Decisions []Decision
	Fence     *Fence
}

// AdmitBatch decides writes to one resource under one lock, in order, each
// against the fence the admitted ones before it leave.
func (g *Guard) AdmitBatch(current *Fence, lock string, writes []Write, policy Policy) (BatchOutcome, error) {
	if err := checkPolicy(policy); err != nil {
		return BatchOutcome{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c, fenceRep, rep, err := g.reps(current, lock, "lock")
	if err != nil {
		return BatchOutcome{}, err
	}
	codes, after, err := c.batch(current, fenceRep, rep, writes, policy)
	if err != nil {
		return BatchOutcome{}, g.failed(err)
	}
	state := current
	var admitted Fence
	out := BatchOutcome{Decisions: make([]Decision, len(writes)), Fence: after}
	for i, w := range writes {
		d, err := decision(uint64(codes[i]), state, w.Token, w.Sequence)
		if err != nil {
			return BatchOutcome{}, g.failed(err)
		}
		if d.Admitted() {
			admitted = Fence{HighWater: d.HighWater, Sequence: d.Sequence}
			state = &admitted
		}
		out.Decisions[i] = d
	}
	return out, nil
}

// StreamOutcome is a stream's verdicts (Admitted, InvalidToken, StaleToken
// or TokenReused each) and the mark after it.
type StreamOutcome struct {
	Verdicts  []Verdict
	HighWater uint64
}

// AdmitStream decides sequence-less tokens on one resource whose lock
// binding the caller checked and whose fence holds no sequence; highWater 0
// means no fence.
func (g *Guard) AdmitStream(highWater uint64, tokens []uint64, policy Policy) (StreamOutcome, error) {
	if err := checkPolicy(policy); err != nil {
		return StreamOutcome{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := g.ready()
	if err != nil {
		return StreamOutcome{}, err
	}
	codes, mark, err := c.stream(highWater, tokens, policy)
	if err != nil {
		return StreamOutcome{}, g.failed(err)
	}
	out := StreamOutcome{Verdicts: make([]Verdict, len(codes)), HighWater: mark}
	for i, b := range codes {
		switch v := Verdict(b); v {
		case Admitted, AdmittedNewTerm:
			out.Verdicts[i] = Admitted
		case InvalidToken, StaleToken, TokenReused:
			out.Verdicts[i] = v
		default:
			return StreamOutcome{}, g.failed(&ModuleError{Cause: fmt.Sprintf("verdict code %d in a stream", b)})
		}
	}
	return out, nil
}
