package guard

import (
	_ "embed"
	"errors"
	"fmt"
)

// Version is this package's release: the version of every fencing package
// and crate built from one commit (CHANGELOG.md in the repository). The
// module's tag is host/packages/go/v0.4.0.
const Version = "0.4.0"

// The fencing:guard@0.3.0 component (fencing_guard.wasm, a committed copy of
// the repository's guest/fencing_guard.wasm; doc.go says why).
//
//go:embed fencing_guard.wasm
var component []byte

// iface is the interface the core module implements; its exports and
// imports carry it in their names.
const iface = "fencing:guard/check@0.3.0"

var errNotComponent = errors.New("not a WebAssembly component binary")

// coreModules returns the payload of every core module section (id 1) at the
// top level of component bytes, in order.
func coreModules(bytes []byte) ([][]byte, error) {
	header := []byte{0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00}
	if len(bytes) < len(header) || string(bytes[:len(header)]) != string(header) {
		return nil, errNotComponent
	}
	var modules [][]byte
	err := sections(bytes, func(id byte, payload []byte) bool {
		if id == 1 {
			modules = append(modules, payload)
		}
		return true
	})
	return modules, err
}

// sections calls visit with the id and payload of each section after the
// 8-byte header of a module or component, until visit returns false.
func sections(bytes []byte, visit func(id byte, payload []byte) bool) error {
	for p := 8; p < len(bytes); {
		id := bytes[p]
		size, start, err := leb128(bytes, p+1)
		if err != nil {
			return err
		}
		end := start + int(size)
		if end > len(bytes) || end < start {
			return fmt.Errorf("truncated wasm binary: section %d at %d runs past the end", id, p)
		}
		if !visit(id, bytes[start:end]) {
			return nil
		}
		p = end
	}
	return nil
}

// leb128 reads an unsigned LEB128 u32 at p: the value and the next offset.
func leb128(bytes []byte, p int) (uint32, int, error) {
	var value uint64
	for shift := 0; shift < 35; shift += 7 {
		if p >= len(bytes) {
			return 0, 0, errors.New("truncated component: a section size runs past the end")
		}
		b := bytes[p]
		p++
		value |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			if value > 0xffffffff {
				break
			}
			return uint32(value), p, nil
		}
	}
	return 0, 0, errors.New("malformed component: a section size is not a u32")
}

// exports reports whether core module bytes export a function named name,
// read from its export section (id 7) without compiling it: a component's
// other modules (its shims) need not compile alone.
func exports(module []byte, name string) (bool, error) {
	if len(module) < 8 || string(module[:4]) != "\x00asm" {
		return false, errors.New("malformed component: a core module without the wasm header")
	}
	var found bool
	var sectionErr error
	err := sections(module, func(id byte, payload []byte) bool {
		if id == 7 {
			found, sectionErr = exportSectionHas(payload, name)
			return false
		}
		return true
	})
	if err != nil {
		return false, err
	}
	return found, sectionErr
}

func exportSectionHas(section []byte, name string) (bool, error) {
	count, p, err := leb128(section, 0)
	if err != nil {
		return false, err
	}
	for range count {
		length, at, err := leb128(section, p)
		if err != nil {
			return false, err
		}
		end := at + int(length)
		// The name, then one byte of kind.
		if end < at || end >= len(section) {
			return false, errors.New("truncated export section")
		}
		exported := string(section[at:end])
		kind := section[end]
		_, next, err := leb128(section, end+1)
		if err != nil {
			return false, err
		}
		if kind == 0 && exported == name {
			return true, nil
		}
		p = next
	}
	return false, nil
}
