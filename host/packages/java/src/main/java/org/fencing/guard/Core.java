package org.fencing.guard;

import com.dylibso.chicory.runtime.ExportFunction;
import com.dylibso.chicory.runtime.HostFunction;
import com.dylibso.chicory.runtime.ImportValues;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.Memory;
import com.dylibso.chicory.wasm.ChicoryException;
import com.dylibso.chicory.wasm.types.FunctionType;
import com.dylibso.chicory.wasm.types.ValType;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;

/**
 * One instance of the core module and the lock names interned in it, with
 * the calls of {@code docs/core-abi.md}. Not thread-safe: the {@link Guard}
 * that owns it serializes its calls. Everything read back from guest memory
 * is checked (alignment, bounds, discriminants).
 */
final class Core {
    private static final String IMPORTS = "[export]" + Component.IFACE;

    private final Memory memory;
    private final ExportFunction realloc;
    private final ExportFunction newLock;
    private final ExportFunction code;
    private final ExportFunction batchFn;
    private final ExportFunction streamFn;
    private final ExportFunction postBatch;
    private final ExportFunction postStream;
    private final ExportFunction setKeysFn;
    private final ExportFunction postSetKeys;
    private final ExportFunction signedFn;
    /** The keys installed with {@link #setKeys} (null: none yet). */
    Keys keys;
    private final Map<Integer, Integer> handles = new HashMap<>();
    private int nextHandle = 1;
    final Map<String, Integer> locks = new HashMap<>();

    Core(Component.Compiled compiled) {
        FunctionType i32ToI32 = FunctionType.of(List.of(ValType.I32), List.of(ValType.I32));
        FunctionType i32ToNone = FunctionType.of(List.of(ValType.I32), List.of());
        ImportValues imports = ImportValues.builder()
                .addFunction(new HostFunction(IMPORTS, "[resource-new]lock-name", i32ToI32, (inst, args) -> {
                    int h = nextHandle++;
                    handles.put(h, (int) args[0]);
                    return new long[] {h};
                }))
                .addFunction(new HostFunction(IMPORTS, "[resource-rep]lock-name", i32ToI32,
                        (inst, args) -> new long[] {rep((int) args[0])}))
                .addFunction(new HostFunction(IMPORTS, "[resource-drop]lock-name", i32ToNone, (inst, args) -> {
                    rep((int) args[0]);
                    handles.remove((int) args[0]);
                    return null;
                }))
                .build();
        Instance instance;
        try {
            instance = Instance.builder(compiled.module())
                    .withImportValues(imports)
                    .withMachineFactory(compiled.machines())
                    .build();
        } catch (ChicoryException e) {
            throw new GuardException("cannot instantiate the core module: " + e.getMessage(), e);
        }
        memory = instance.memory();
        realloc = required(instance, "cabi_realloc");
        newLock = required(instance, Component.IFACE + "#[constructor]lock-name");
        code = required(instance, Component.IFACE + "#admit-code");
        batchFn = required(instance, Component.IFACE + "#admit-batch");
        streamFn = required(instance, Component.IFACE + "#admit-stream");
        postBatch = optional(instance, "cabi_post_" + Component.IFACE + "#admit-batch");
        postStream = optional(instance, "cabi_post_" + Component.IFACE + "#admit-stream");
        setKeysFn = required(instance, Component.IFACE + "#set-keys");
        postSetKeys = optional(instance, "cabi_post_" + Component.IFACE + "#set-keys");
        signedFn = required(instance, Component.IFACE + "#admit-signed");
    }

    private static ExportFunction required(Instance instance, String name) {
        ExportFunction f = optional(instance, name);
        if (f == null) {
            throw new GuardException("the module has no function " + name);
        }
        return f;
    }

    private static ExportFunction optional(Instance instance, String name) {
        var exports = instance.module().exportSection();
        for (int i = 0; i < exports.exportCount(); i++) {
            if (exports.getExport(i).name().equals(name)) {
                return instance.export(name);
            }
        }
        return null;
    }

    private int rep(int handle) {
        Integer rep = handles.get(handle);
        if (rep == null) {
            throw new GuardException("unknown lock-name handle " + handle);
        }
        return rep;
    }

    private long call(ExportFunction f, long... args) {
        try {
            long[] r = f.apply(args);
            return r == null || r.length == 0 ? 0 : r[0];
        } catch (ChicoryException e) {
            throw new GuardException("the module trapped: " + e.getMessage(), e);
        }
    }

    private long memorySize() {
        return (long) memory.pages() * 65536;
    }

    /** cabi_realloc(0, 0, align, size), checked for alignment and bounds. */
    private int alloc(int size, int align) {
        long ptr = Integer.toUnsignedLong((int) call(realloc, 0, 0, align, size));
        if (ptr % align != 0 || ptr + size > memorySize()) {
            throw new GuardException("cabi_realloc returned " + ptr + " for " + size + " bytes");
        }
        return (int) ptr;
    }

    /** The rep of {@code name}'s lock-name, constructed on first use. */
    int lock(String name) {
        Integer known = locks.get(name);
        if (known != null) {
            return known;
        }
        byte[] utf8 = name.getBytes(StandardCharsets.UTF_8);
        int ptr = alloc(utf8.length, 1);
        memory.write(ptr, utf8);
        int rep = rep((int) call(newLock, ptr, utf8.length));
        locks.put(name, rep);
        return rep;
    }

    private static long[] flatFence(Fence current, int rep) {
        if (current == null) {
            return new long[] {0, 0, 0, 0, 0};
        }
        OptionalLong s = current.sequence();
        return new long[] {1, rep, current.highWater(), s.isPresent() ? 1 : 0, s.orElse(0)};
    }

    /** admit-code: the verdict code. */
    long admitCode(Fence current, int fenceRep, int rep, Sequencer p, Policy policy) {
        long[] f = flatFence(current, fenceRep);
        OptionalLong s = p.sequence();
        return call(code, f[0], f[1], f[2], f[3], f[4], rep, p.token(), s.isPresent() ? 1 : 0, s.orElse(0),
                policy.ordinal());
    }

    private int bytesIn(byte[] bytes, int align) {
        int ptr = alloc(bytes.length, align);
        memory.write(ptr, bytes);
        return ptr;
    }

    /** {@code set-keys}: null when installed, else the {@code key-error} case and its id. */
    long[] setKeys(Keys set) {
        List<Keys.Key> list = set.keys;
        byte[] records = new byte[16 * list.size()];
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(records).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < list.size(); i++) {
            Keys.Key k = list.get(i);
            byte[] material = k.material();
            int ptr = bytesIn(material, 1);
            b.putInt(16 * i, (int) k.id());
            b.put(16 * i + 4, (byte) k.algorithm().ordinal());
            b.putInt(16 * i + 8, ptr);
            b.putInt(16 * i + 12, material.length);
        }
        int ptr = bytesIn(records, 4);
        long ret = Integer.toUnsignedLong((int) call(setKeysFn, ptr, list.size()));
        if (ret % 4 != 0 || ret + 12 > memorySize()) {
            throw new GuardException("bad result pointer " + ret);
        }
        int at = (int) ret;
        long disc = memory.readU8(at);
        long kase = memory.readU8(at + 4);
        long id = Integer.toUnsignedLong(memory.readInt(at + 8));
        if (postSetKeys != null) {
            call(postSetKeys, at);
        }
        if (disc == 0) {
            return null;
        }
        if (disc != 1 || kase > 3) {
            throw new GuardException("set-keys answered discriminants " + disc + ", " + kase);
        }
        return new long[] {kase, id};
    }

    /** {@code admit-signed}: the verdict code. */
    long admitSigned(Fence current, int fenceRep, int rep, Sequencer p, byte[] proof, Policy policy) {
        int ptr = bytesIn(proof, 1);
        long[] f = flatFence(current, fenceRep);
        OptionalLong s = p.sequence();
        return call(signedFn, f[0], f[1], f[2], f[3], f[4], rep, p.token(), s.isPresent() ? 1 : 0, s.orElse(0),
                ptr, proof.length, policy.ordinal());
    }

    private int record(long ret, int size) {
        long at = Integer.toUnsignedLong((int) ret);
        if (at % 8 != 0 || at + size > memorySize()) {
            throw new GuardException("bad result pointer " + at);
        }
        return (int) at;
    }

    private byte[] verdicts(int at, int expected) {
        long ptr = Integer.toUnsignedLong(memory.readInt(at));
        long n = Integer.toUnsignedLong(memory.readInt(at + 4));
        if (n != expected) {
            throw new GuardException("the module returned " + n + " verdicts for " + expected + " inputs");
        }
        if (ptr + n > memorySize()) {
            throw new GuardException("verdict list out of bounds");
        }
        return n == 0 ? new byte[0] : memory.readBytes((int) ptr, (int) n);
    }

    private OptionalLong optionAt(int at) {
        long d = memory.readU8(at);
        if (d == 0) {
            return OptionalLong.empty();
        }
        if (d != 1) {
            throw new GuardException("option discriminant " + d);
        }
        return OptionalLong.of(mark(memory.readLong(at + 8)));
    }

    /** A u64 read back, which validated inputs keep below 2^63. */
    private static long mark(long value) {
        if (value < 0) {
            throw new GuardException("the module returned " + Long.toUnsignedString(value) + ", which no input held");
        }
        return value;
    }

    /** The verdict codes of a batch and the numeric fence after it. */
    record Batch(byte[] codes, FenceState after) {}

    Batch batch(Fence current, int fenceRep, int rep, List<Write> writes, Policy policy) {
        int n = writes.size();
        int ptr = alloc(n * 24, 8);
        for (int i = 0; i < n; i++) {
            Write w = writes.get(i);
            int o = ptr + i * 24;
            memory.writeLong(o, w.token());
            memory.writeLong(o + 8, w.sequence().isPresent() ? 1 : 0);
            memory.writeLong(o + 16, w.sequence().orElse(0));
        }
        long[] f = flatFence(current, fenceRep);
        long ret = call(batchFn, f[0], f[1], f[2], f[3], f[4], rep, ptr, n, policy.ordinal());
        int at = record(ret, 40);
        byte[] codes = verdicts(at, n);
        FenceState after;
        long some = memory.readU8(at + 8);
        if (some == 0) {
            after = null;
        } else if (some == 1) {
            after = new FenceState(mark(memory.readLong(at + 16)), optionAt(at + 24));
        } else {
            throw new GuardException("option discriminant " + some);
        }
        if (postBatch != null) {
            call(postBatch, ret);
        }
        return new Batch(codes, after);
    }

    /** The verdict codes of a stream and the mark after it. */
    record Stream(byte[] codes, long highWater) {}

    Stream stream(long highWater, long[] tokens, Policy policy) {
        int n = tokens.length;
        int ptr = alloc(n * 8, 8);
        for (int i = 0; i < n; i++) {
            memory.writeLong(ptr + i * 8, tokens[i]);
        }
        long ret = call(streamFn, highWater, ptr, n, policy.ordinal());
        int at = record(ret, 16);
        byte[] codes = verdicts(at, n);
        long mark = mark(memory.readLong(at + 8));
        if (postStream != null) {
            call(postStream, ret);
        }
        return new Stream(codes, mark);
    }
}
