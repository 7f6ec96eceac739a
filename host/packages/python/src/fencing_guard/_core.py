"""The engine of `Guard`: the component's core module under wasmtime's core API.

The `fencing:guard` component holds one core module that implements the
contract; this module finds it, instantiates it, and lowers and lifts the
canonical ABI by hand (`docs/core-abi.md` in the repository), as the Node
package does. A single decision is `admit-code`: ten scalar arguments and a
scalar verdict code, so no guest memory is read. Batches and streams pass
their lists through guest memory.

Calls take wasmtime's unchecked entry point (`wasmtime_func_call_unchecked`)
with a preallocated argument array when this wasmtime-py exposes it: the
checked `Func.__call__` re-reads the function's type and converts each value
on every call, which costs tens of microseconds. Without it, calls fall back
to `Func.__call__` with the same answers.

Nothing here validates the caller's values (`_guard.py` does); everything the
module returns is checked (pointers, lengths, discriminants), so a broken
module fails the call with `ContractError`, never misleads it.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Callable, Optional, Sequence

from wasmtime import Engine, FuncType, Linker, Memory, Module, Store, Trap, ValType, WasmtimeError

try:  # the unchecked call path; optional (see the module docs)
    from wasmtime import _bindings as _ffi

    _UNCHECKED = _ffi._wasmtime_func_call_unchecked
    _RAW = _ffi.wasmtime_val_raw
    _TRAP = _ffi.wasm_trap_t
except (ImportError, AttributeError):  # pragma: no cover - depends on the wasmtime-py release
    _UNCHECKED = None

INTERFACE = "fencing:guard/check@0.3.0"
_I64_MAX = (1 << 63) - 1
_TWO_64 = 1 << 64


class ContractError(RuntimeError):
    """The component answered outside the contract (a broken or foreign plugin)."""


def i64(value: int) -> int:
    """A u64 as the i64 bit pattern a core function takes."""
    return value - _TWO_64 if value > _I64_MAX else value


def _leb(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data):
            raise ContractError("truncated component")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte & 0x80 == 0:
            return value, at
        shift += 7


def core_module(engine: Engine, component: bytes) -> Module:
    """The one core module of `component` that exports `INTERFACE#admit-code`."""
    if component[:8] != b"\x00asm\x0d\x00\x01\x00":
        raise ContractError("not a WebAssembly component binary")
    found = []
    at = 8
    while at < len(component):
        section = component[at]
        size, start = _leb(component, at + 1)
        payload = component[start : start + size]
        if len(payload) != size:
            raise ContractError("truncated component")
        if section == 1:
            module = Module(engine, payload)
            if any(e.name == f"{INTERFACE}#admit-code" for e in module.exports):
                found.append(module)
        at = start + size
    if len(found) != 1:
        raise ContractError(f"expected one core module implementing {INTERFACE}, found {len(found)}")
    return found[0]


class Core:
    """One instance of the core module and the lock names interned in it."""

    def __init__(self, engine: Engine, module: Module) -> None:
        self.store = Store(engine)
        handles: list[Optional[int]] = [None]  # handle N is handles[N]; 0 is never a handle

        def rep(handle: int) -> int:
            r = handles[handle] if 0 < handle < len(handles) else None
            if r is None:
                raise ContractError(f"unknown lock-name handle {handle}")
            return r

        def new(r: int) -> int:
            handles.append(r)
            return len(handles) - 1

        def drop(handle: int) -> None:
            rep(handle)
            handles[handle] = None

        i32 = ValType.i32()
        linker = Linker(engine)
        intrinsics = f"[export]{INTERFACE}"
        linker.define_func(intrinsics, "[resource-new]lock-name", FuncType([i32], [i32]), new)
        linker.define_func(intrinsics, "[resource-rep]lock-name", FuncType([i32], [i32]), rep)
        linker.define_func(intrinsics, "[resource-drop]lock-name", FuncType([i32], []), drop)
        exports = linker.instantiate(self.store, module).exports(self.store)
        memory = exports.get("memory")
        if not isinstance(memory, Memory):
            raise ContractError("the module exports no memory")
        self.memory = memory
        self._rep = rep
        self._realloc = self._caller(exports, "cabi_realloc", 4)
        self._new_lock = self._caller(exports, f"{INTERFACE}#[constructor]lock-name", 2)
        #: `admit-code` with its ten flat arguments: the verdict code.
        self.code = self._caller(exports, f"{INTERFACE}#admit-code", 10)
        self._batch = self._caller(exports, f"{INTERFACE}#admit-batch", 9)
        self._stream = self._caller(exports, f"{INTERFACE}#admit-stream", 4)
        self._post_batch = self._caller(exports, f"cabi_post_{INTERFACE}#admit-batch", 1, required=False)
        self._post_stream = self._caller(exports, f"cabi_post_{INTERFACE}#admit-stream", 1, required=False)
        self._set_keys = self._caller(exports, f"{INTERFACE}#set-keys", 2)
        self._post_set_keys = self._caller(exports, f"cabi_post_{INTERFACE}#set-keys", 1, required=False)
        #: `admit-signed` with its twelve flat arguments: the verdict code.
        self.signed = self._caller(exports, f"{INTERFACE}#admit-signed", 12)
        #: The `Keys` installed with `set_keys` (None: none yet).
        self.keys: object = None
        #: Lock name to its rep.
        self.locks: dict[str, int] = {}

    def _caller(self, exports: object, name: str, arity: int, required: bool = True) -> Callable[..., int]:
        func = exports.get(name)  # type: ignore[attr-defined]
        if func is None:
            if required:
                raise ContractError(f"the module has no function {name}")
            return None  # type: ignore[return-value]
        ty = func.type(self.store)
        if len(ty.params) != arity:
            raise ContractError(f"{name} takes {len(ty.params)} values, not {arity}")
        if _UNCHECKED is None:

            def checked(*args: int) -> int:
                result = func(self.store, *args)
                return 0 if result is None else result & 0xFFFFFFFF

            return checked
        results = len(ty.results)
        raw = (_RAW * max(arity, results, 1))()
        # Every argument is written as an int64 into the low 8 bytes of its
        # 16-byte slot, all in one slice assignment (a field write per value
        # costs four times as much): an i32 is the low half of its i64, and
        # every value here fits (i64 values arrive converted, i32 values are
        # pointers, lengths, reps and small enums). An i32 result is read back
        # the same way, as the low 32 bits, unsigned.
        words = (ctypes.c_int64 * (2 * len(raw))).from_buffer(raw)
        end = 2 * arity
        context = self.store._context()
        target = ctypes.byref(func._func)
        trap = ctypes.POINTER(_TRAP)()
        trap_ref = ctypes.byref(trap)
        size = len(raw)

        def call(*args: int) -> int:
            words[0:end:2] = args
            error = _UNCHECKED(context, target, raw, size, trap_ref)
            if error:
                raise WasmtimeError._from_ptr(error)
            if trap:
                raise Trap._from_ptr(trap)
            return words[0] & 0xFFFFFFFF

        return call

    # -- memory ----------------------------------------------------------------

    def alloc(self, size: int, align: int) -> int:
        """`cabi_realloc(0, 0, align, size)`, checked for alignment and bounds."""
        ptr = self._realloc(0, 0, align, size) & 0xFFFFFFFF
        if ptr % align or ptr + size > self.memory.data_len(self.store):
            raise ContractError(f"cabi_realloc returned {ptr} for {size} bytes")
        return ptr

    def span(self) -> tuple[int, int]:
        """The address and length of guest memory now (a wasm call may grow or move it)."""
        base = ctypes.cast(self.memory.data_ptr(self.store), ctypes.c_void_p).value or 0
        return base, self.memory.data_len(self.store)

    def read(self, ptr: int, size: int, align: int = 1, span: Optional[tuple[int, int]] = None) -> bytes:
        """`size` bytes at `ptr`, checked for alignment and bounds (`span`:
        the memory's, when the caller read it since the last wasm call)."""
        base, length = self.span() if span is None else span
        ptr &= 0xFFFFFFFF
        if ptr % align or ptr + size > length:
            raise ContractError(f"result {ptr}+{size} is misaligned or out of bounds")
        return ctypes.string_at(base + ptr, size)

    def write(self, ptr: int, data: bytes) -> None:
        """Copies `data` to `ptr`, which `alloc` returned for at least its length."""
        base, _ = self.span()
        ctypes.memmove(base + ptr, data, len(data))

    def lock(self, name: str) -> int:
        """The rep of `name`'s lock-name, constructed on first use."""
        r = self.locks.get(name)
        if r is None:
            utf8 = name.encode("utf-8")
            ptr = self.alloc(len(utf8), 1)
            self.write(ptr, utf8)
            r = self._rep(self._new_lock(ptr, len(utf8)))
            self.locks[name] = r
        return r

    def bytes_in(self, data: bytes) -> int:
        """Copies `data` into guest memory; its address."""
        ptr = self.alloc(len(data), 1)
        self.write(ptr, data)
        return ptr

    # -- the calls -------------------------------------------------------------

    def set_keys(self, keys: Sequence[tuple[int, int, bytes]]) -> Optional[tuple[int, int]]:
        """`set-keys` with (id, algorithm case, material) each: None when
        installed, else the `key-error` case and its id."""
        materials = [self.bytes_in(m) for (_, _, m) in keys]
        records = b"".join(
            struct.pack("<IB3xII", ident, algorithm, ptr, len(m)) for (ident, algorithm, m), ptr in zip(keys, materials)
        )
        ptr = self.alloc(len(records), 4)
        self.write(ptr, records)
        ret = self._set_keys(ptr, len(keys))
        result = self.read(ret, 12, 4)
        if self._post_set_keys is not None:
            self._post_set_keys(ret)
        if result[0] == 0:
            return None
        if result[0] != 1 or result[4] > 3:
            raise ContractError(f"set-keys answered discriminants {result[0]}, {result[4]}")
        return result[4], struct.unpack_from("<I", result, 8)[0]

    def batch(self, fence: Sequence[int], rep: int, words: bytes, n: int, policy: int) -> tuple[bytes, Optional[tuple[int, Optional[int]]]]:
        """`admit-batch` over `words`, the `list<batch-write>` laid out (24 bytes a
        write). The verdict bytes and the fence state after the batch."""
        ptr = self.alloc(len(words), 8)
        self.write(ptr, words)
        ret = self._batch(*fence, rep, ptr, n, policy)
        span = self.span()
        record = self.read(ret, 40, 8, span)
        codes = self._verdicts(record, n, span)
        state = None
        if record[8] == 1:
            high_water, some, seq = struct.unpack_from("<QB7xQ", record, 16)
            state = (high_water, _option(some, seq))
        elif record[8] != 0:
            raise ContractError(f"option discriminant {record[8]}")
        if self._post_batch is not None:
            self._post_batch(ret)
        return codes, state

    def stream(self, high_water: int, tokens: bytes, n: int, policy: int) -> tuple[bytes, int]:
        """`admit-stream` over `tokens`, the `list<u64>` laid out (`n` tokens,
        8 bytes each): the verdict bytes and the mark after the stream."""
        ptr = self.alloc(n * 8, 8)
        self.write(ptr, tokens)
        ret = self._stream(i64(high_water), ptr, n, policy)
        span = self.span()
        record = self.read(ret, 16, 8, span)
        codes = self._verdicts(record, n, span)
        (mark,) = struct.unpack_from("<Q", record, 8)
        if self._post_stream is not None:
            self._post_stream(ret)
        return codes, mark

    def _verdicts(self, record: bytes, expected: int, span: tuple[int, int]) -> bytes:
        ptr, length = struct.unpack_from("<II", record, 0)
        if length != expected:
            raise ContractError(f"the module returned {length} verdicts for {expected} inputs")
        return self.read(ptr, length, 1, span)


def _option(discriminant: int, value: int) -> Optional[int]:
    if discriminant > 1:
        raise ContractError(f"option discriminant {discriminant}")
    return value if discriminant else None
