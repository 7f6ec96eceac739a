package guard

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// engine is the wazero runtime, the host functions the module imports, and
// the compiled core module: built once per process (or per component given
// to NewWithComponent) and shared by every instance.
type engine struct {
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
}

var (
	shippedOnce   sync.Once
	shippedEngine *engine
	shippedErr    error
)

// shipped is the engine of the embedded component.
func shipped() (*engine, error) {
	shippedOnce.Do(func() { shippedEngine, shippedErr = newEngine(component) })
	return shippedEngine, shippedErr
}

// handles maps the lock-name handles the module asks for to their reps. A
// handle only lives while a name is constructed, so one table serves every
// instance.
var handles = struct {
	sync.Mutex
	next uint32
	reps map[uint32]uint32
}{next: 1, reps: map[uint32]uint32{}}

func newEngine(componentBytes []byte) (*engine, error) {
	ctx := context.Background()
	// 16 MiB of guest memory at most: the rules use a few pages.
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(256))
	i32 := []api.ValueType{api.ValueTypeI32}
	_, err := r.NewHostModuleBuilder("[export]"+iface).
		NewFunctionBuilder().WithGoFunction(api.GoFunc(resourceNew), i32, i32).Export("[resource-new]lock-name").
		NewFunctionBuilder().WithGoFunction(api.GoFunc(resourceRep), i32, i32).Export("[resource-rep]lock-name").
		NewFunctionBuilder().WithGoFunction(api.GoFunc(resourceDrop), i32, nil).Export("[resource-drop]lock-name").
		Instantiate(ctx)
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("guard: host functions: %w", err)
	}
	compiled, err := findModule(ctx, r, componentBytes)
	if err != nil {
		r.Close(ctx)
		return nil, err
	}
	return &engine{runtime: r, compiled: compiled}, nil
}

// findModule compiles the one core module of the component that exports
// iface#admit-code (docs/core-abi.md, "Finding the module").
func findModule(ctx context.Context, r wazero.Runtime, componentBytes []byte) (wazero.CompiledModule, error) {
	modules, err := coreModules(componentBytes)
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	var found [][]byte
	for _, m := range modules {
		has, err := exports(m, iface+"#admit-code")
		if err != nil {
			return nil, fmt.Errorf("guard: %w", err)
		}
		if has {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("guard: expected one core module implementing %s, found %d", iface, len(found))
	}
	compiled, err := r.CompileModule(ctx, found[0])
	if err != nil {
		return nil, fmt.Errorf("guard: the core module does not compile: %w", err)
	}
	return compiled, nil
}

func resourceNew(_ context.Context, stack []uint64) {
	handles.Lock()
	defer handles.Unlock()
	h := handles.next
	handles.next++
	if handles.next == 0 {
		handles.next = 1
	}
	handles.reps[h] = uint32(stack[0])
	stack[0] = uint64(h)
}

func resourceRep(_ context.Context, stack []uint64) {
	handles.Lock()
	defer handles.Unlock()
	rep, ok := handles.reps[uint32(stack[0])]
	if !ok {
		panic(fmt.Sprintf("unknown lock-name handle %d", uint32(stack[0])))
	}
	stack[0] = uint64(rep)
}

func resourceDrop(_ context.Context, stack []uint64) {
	handles.Lock()
	defer handles.Unlock()
	if _, ok := handles.reps[uint32(stack[0])]; !ok {
		panic(fmt.Sprintf("unknown lock-name handle %d", uint32(stack[0])))
	}
	delete(handles.reps, uint32(stack[0]))
}

// core is one instance of the core module and the lock names interned in it.
// Not safe for concurrent use: the Guard that owns it serializes its calls.
type core struct {
	mod                    api.Module
	mem                    api.Memory
	realloc, newLock, code api.Function
	batchFn, streamFn      api.Function
	postBatch, postStream  api.Function
	setKeysFn, postSetKeys api.Function
	signedFn               api.Function
	locks                  map[string]uint32
	stack                  []uint64
	// keys is the Keys installed with setKeys (nil: none yet).
	keys *Keys
}

func newCore(e *engine) (*core, error) {
	ctx := context.Background()
	mod, err := e.runtime.InstantiateModule(ctx, e.compiled, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, fmt.Errorf("guard: instantiate the core module: %w", err)
	}
	c := &core{mod: mod, mem: mod.Memory(), locks: map[string]uint32{}, stack: make([]uint64, 12)}
	if c.mem == nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("guard: the module exports no memory")
	}
	for _, f := range []struct {
		fn       *api.Function
		name     string
		required bool
	}{
		{&c.realloc, "cabi_realloc", true},
		{&c.newLock, iface + "#[constructor]lock-name", true},
		{&c.code, iface + "#admit-code", true},
		{&c.batchFn, iface + "#admit-batch", true},
		{&c.streamFn, iface + "#admit-stream", true},
		{&c.postBatch, "cabi_post_" + iface + "#admit-batch", false},
		{&c.postStream, "cabi_post_" + iface + "#admit-stream", false},
		{&c.setKeysFn, iface + "#set-keys", true},
		{&c.postSetKeys, "cabi_post_" + iface + "#set-keys", false},
		{&c.signedFn, iface + "#admit-signed", true},
	} {
		*f.fn = mod.ExportedFunction(f.name)
		if *f.fn == nil && f.required {
			mod.Close(ctx)
			return nil, fmt.Errorf("guard: the module has no function %s", f.name)
		}
	}
	return c, nil
}

func (c *core) close() { c.mod.Close(context.Background()) }

// call runs fn with the first len(args) slots of the reused stack; the result is stack[0].
func (c *core) call(fn api.Function, n int) (uint64, error) {
	if err := fn.CallWithStack(context.Background(), c.stack[:max(n, 1)]); err != nil {
		return 0, &ModuleError{Cause: err.Error()}
	}
	return c.stack[0], nil
}

// alloc is cabi_realloc(0, 0, align, size), checked for alignment and bounds.
func (c *core) alloc(size, align uint32) (uint32, error) {
	c.stack[0], c.stack[1], c.stack[2], c.stack[3] = 0, 0, uint64(align), uint64(size)
	r, err := c.call(c.realloc, 4)
	if err != nil {
		return 0, err
	}
	ptr := uint32(r)
	if ptr%align != 0 || uint64(ptr)+uint64(size) > uint64(c.mem.Size()) {
		return 0, &ModuleError{Cause: fmt.Sprintf("cabi_realloc returned %d for %d bytes", ptr, size)}
	}
	return ptr, nil
}

// lock is the rep of name's lock-name, constructed on first use.
func (c *core) lock(name string) (uint32, error) {
	if rep, ok := c.locks[name]; ok {
		return rep, nil
	}
	ptr, err := c.alloc(uint32(len(name)), 1)
	if err != nil {
		return 0, err
	}
	c.mem.Write(ptr, []byte(name))
	c.stack[0], c.stack[1] = uint64(ptr), uint64(len(name))
	h, err := c.call(c.newLock, 2)
	if err != nil {
		return 0, err
	}
	handles.Lock()
	rep, ok := handles.reps[uint32(h)]
	handles.Unlock()
	if !ok {
		return 0, &ModuleError{Cause: fmt.Sprintf("the constructor returned unknown handle %d", uint32(h))}
	}
	c.locks[name] = rep
	return rep, nil
}

// flatFence puts the flat option<fence> in stack[0:5].
func (c *core) flatFence(current *Fence, rep uint32) {
	if current == nil {
		c.stack[0], c.stack[1], c.stack[2], c.stack[3], c.stack[4] = 0, 0, 0, 0, 0
		return
	}
	c.stack[0], c.stack[1], c.stack[2] = 1, uint64(rep), current.HighWater
	c.stack[3], c.stack[4] = flatSequence(current.Sequence)
}

func flatSequence(s Sequence) (uint64, uint64) {
	if !s.Valid {
		return 0, 0
	}
	return 1, s.Value
}

// admitCode calls admit-code: the verdict code.
func (c *core) admitCode(current *Fence, fenceRep, rep uint32, p Sequencer, policy Policy) (uint64, error) {
	c.flatFence(current, fenceRep)
	c.stack[5], c.stack[6] = uint64(rep), p.Token
	c.stack[7], c.stack[8] = flatSequence(p.Sequence)
	c.stack[9] = uint64(policy)
	return c.call(c.code, 10)
}

// bytesIn copies b into guest memory aligned to align; its address.
func (c *core) bytesIn(b []byte, align uint32) (uint32, error) {
	ptr, err := c.alloc(uint32(len(b)), align)
	if err != nil {
		return 0, err
	}
	c.mem.Write(ptr, b)
	return ptr, nil
}

// setKeys calls set-keys: refused with the key-error case and its id, or installed.
func (c *core) setKeys(keys []VerifierKey) (refused bool, kase uint8, id uint32, err error) {
	records := make([]byte, 16*len(keys))
	for i, k := range keys {
		ptr, err := c.bytesIn(k.Material, 1)
		if err != nil {
			return false, 0, 0, err
		}
		r := records[16*i:]
		binary.LittleEndian.PutUint32(r[0:], k.ID)
		r[4] = byte(k.Algorithm)
		binary.LittleEndian.PutUint32(r[8:], ptr)
		binary.LittleEndian.PutUint32(r[12:], uint32(len(k.Material)))
	}
	ptr, err := c.bytesIn(records, 4)
	if err != nil {
		return false, 0, 0, err
	}
	c.stack[0], c.stack[1] = uint64(ptr), uint64(len(keys))
	ret, err := c.call(c.setKeysFn, 2)
	if err != nil {
		return false, 0, 0, err
	}
	at := uint32(ret)
	result, ok := c.mem.Read(at, 12)
	if !ok || at%4 != 0 {
		return false, 0, 0, &ModuleError{Cause: fmt.Sprintf("bad result pointer %d", at)}
	}
	disc, kase, id := result[0], result[4], binary.LittleEndian.Uint32(result[8:])
	if c.postSetKeys != nil {
		c.stack[0] = ret
		if _, err := c.call(c.postSetKeys, 1); err != nil {
			return false, 0, 0, err
		}
	}
	switch {
	case disc == 0:
		return false, 0, 0, nil
	case disc == 1 && kase <= 3:
		return true, kase, id, nil
	}
	return false, 0, 0, &ModuleError{Cause: fmt.Sprintf("set-keys answered discriminants %d, %d", disc, kase)}
}

// admitSigned calls admit-signed: the verdict code.
func (c *core) admitSigned(current *Fence, fenceRep, rep uint32, p Sequencer, proof []byte, policy Policy) (uint64, error) {
	ptr, err := c.bytesIn(proof, 1)
	if err != nil {
		return 0, err
	}
	c.flatFence(current, fenceRep)
	c.stack[5], c.stack[6] = uint64(rep), p.Token
	c.stack[7], c.stack[8] = flatSequence(p.Sequence)
	c.stack[9], c.stack[10], c.stack[11] = uint64(ptr), uint64(len(proof)), uint64(policy)
	return c.call(c.signedFn, 12)
}

// record checks a result record of size bytes at ptr (alignment 8, bounds).
func (c *core) record(ptr uint64, size uint32) (uint32, error) {
	at := uint32(ptr)
	if at%8 != 0 || uint64(at)+uint64(size) > uint64(c.mem.Size()) {
		return 0, &ModuleError{Cause: fmt.Sprintf("bad result pointer %d", at)}
	}
	return at, nil
}

// verdicts copies the list<u8> whose pointer and length open the record at at.
func (c *core) verdicts(at uint32, expected int) ([]byte, error) {
	ptr, _ := c.mem.ReadUint32Le(at)
	n, _ := c.mem.ReadUint32Le(at + 4)
	if int(n) != expected {
		return nil, &ModuleError{Cause: fmt.Sprintf("the module returned %d verdicts for %d inputs", n, expected)}
	}
	bytes, ok := c.mem.Read(ptr, n)
	if !ok {
		return nil, &ModuleError{Cause: "verdict list out of bounds"}
	}
	return append([]byte(nil), bytes...), nil
}

// optionAt reads an option<u64> at at: discriminant byte, value 8 bytes later.
func (c *core) optionAt(at uint32) (Sequence, error) {
	d, _ := c.mem.ReadByte(at)
	switch d {
	case 0:
		return Sequence{}, nil
	case 1:
		v, _ := c.mem.ReadUint64Le(at + 8)
		return Seq(v), nil
	}
	return Sequence{}, &ModuleError{Cause: fmt.Sprintf("option discriminant %d", d)}
}

// batch calls admit-batch: the verdict codes and the numeric fence after.
func (c *core) batch(current *Fence, fenceRep, rep uint32, writes []Write, policy Policy) ([]byte, *Fence, error) {
	n := uint32(len(writes))
	ptr, err := c.alloc(n*24, 8)
	if err != nil {
		return nil, nil, err
	}
	if n > 0 {
		buf, _ := c.mem.Read(ptr, n*24)
		for i, w := range writes {
			o := i * 24
			putU64(buf[o:], w.Token)
			d, v := flatSequence(w.Sequence)
			putU64(buf[o+8:], d)
			putU64(buf[o+16:], v)
		}
	}
	c.flatFence(current, fenceRep)
	c.stack[5], c.stack[6], c.stack[7], c.stack[8] = uint64(rep), uint64(ptr), uint64(n), uint64(policy)
	ret, err := c.call(c.batchFn, 9)
	if err != nil {
		return nil, nil, err
	}
	at, err := c.record(ret, 40)
	if err != nil {
		return nil, nil, err
	}
	codes, err := c.verdicts(at, len(writes))
	if err != nil {
		return nil, nil, err
	}
	var after *Fence
	switch d, _ := c.mem.ReadByte(at + 8); d {
	case 0:
	case 1:
		hw, _ := c.mem.ReadUint64Le(at + 16)
		seq, err := c.optionAt(at + 24)
		if err != nil {
			return nil, nil, err
		}
		after = &Fence{HighWater: hw, Sequence: seq}
	default:
		return nil, nil, &ModuleError{Cause: fmt.Sprintf("option discriminant %d", d)}
	}
	if c.postBatch != nil {
		c.stack[0] = ret
		if _, err := c.call(c.postBatch, 1); err != nil {
			return nil, nil, err
		}
	}
	return codes, after, nil
}

// stream calls admit-stream: the verdict codes and the mark after.
func (c *core) stream(highWater uint64, tokens []uint64, policy Policy) ([]byte, uint64, error) {
	n := uint32(len(tokens))
	ptr, err := c.alloc(n*8, 8)
	if err != nil {
		return nil, 0, err
	}
	if n > 0 {
		buf, _ := c.mem.Read(ptr, n*8)
		for i, t := range tokens {
			putU64(buf[i*8:], t)
		}
	}
	c.stack[0], c.stack[1], c.stack[2], c.stack[3] = highWater, uint64(ptr), uint64(n), uint64(policy)
	ret, err := c.call(c.streamFn, 4)
	if err != nil {
		return nil, 0, err
	}
	at, err := c.record(ret, 16)
	if err != nil {
		return nil, 0, err
	}
	codes, err := c.verdicts(at, len(tokens))
	if err != nil {
		return nil, 0, err
	}
	mark, _ := c.mem.ReadUint64Le(at + 8)
	if c.postStream != nil {
		c.stack[0] = ret
		if _, err := c.call(c.postStream, 1); err != nil {
			return nil, 0, err
		}
	}
	return codes, mark, nil
}

func putU64(b []byte, v uint64) {
	_ = b[7]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	b[4], b[5], b[6], b[7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
}
