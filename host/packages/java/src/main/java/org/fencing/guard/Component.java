package org.fencing.guard;

import com.dylibso.chicory.compiler.MachineFactoryCompiler;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.Machine;
import com.dylibso.chicory.wasm.Parser;
import com.dylibso.chicory.wasm.WasmModule;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;

/**
 * The component's core module, found as {@code docs/core-abi.md} says: the
 * one top-level core module section whose export section names
 * {@code fencing:guard/check@0.3.0#admit-code} (read without compiling: the
 * component's other modules are shims that need not compile alone), parsed
 * and compiled to JVM bytecode once.
 */
final class Component {
    static final String IFACE = "fencing:guard/check@0.3.0";

    /** The parsed module and the factory of its compiled machines, shared by every instance. */
    record Compiled(WasmModule module, Function<Instance, Machine> machines) {}

    private static final class Shipped {
        static final Compiled COMPILED = compile(readShipped());
    }

    private Component() {}

    /** The embedded component, compiled on first use. */
    static Compiled shipped() {
        return Shipped.COMPILED;
    }

    private static byte[] readShipped() {
        try (InputStream in = Component.class.getResourceAsStream("fencing_guard.wasm")) {
            if (in == null) {
                throw new GuardException("the jar holds no fencing_guard.wasm: build it from a checkout of the"
                        + " fencing repository, where guest/fencing_guard.wasm is committed");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new GuardException("cannot read the embedded component", e);
        }
    }

    /** Finds and compiles the implementing module of {@code component}. */
    static Compiled compile(byte[] component) {
        List<byte[]> found = new ArrayList<>();
        for (byte[] module : coreModules(component)) {
            if (exportsFunction(module, IFACE + "#admit-code")) {
                found.add(module);
            }
        }
        if (found.size() != 1) {
            throw new GuardException("expected one core module implementing " + IFACE + ", found " + found.size());
        }
        try {
            WasmModule module = Parser.parse(found.get(0));
            return new Compiled(module, MachineFactoryCompiler.compile(module));
        } catch (RuntimeException e) {
            throw new GuardException("the core module does not compile: " + e.getMessage(), e);
        }
    }

    /** The payload of every core module section (id 1) at the top level of {@code bytes}. */
    static List<byte[]> coreModules(byte[] bytes) {
        byte[] header = {0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00};
        if (bytes.length < header.length || !Arrays.equals(Arrays.copyOf(bytes, header.length), header)) {
            throw new GuardException("not a WebAssembly component binary");
        }
        List<byte[]> modules = new ArrayList<>();
        int p = header.length;
        while (p < bytes.length) {
            int id = bytes[p] & 0xff;
            long[] size = leb128(bytes, p + 1);
            long end = size[1] + size[0];
            if (end > bytes.length) {
                throw new GuardException("truncated component: section " + id + " at " + p + " runs past the end");
            }
            if (id == 1) {
                modules.add(Arrays.copyOfRange(bytes, (int) size[1], (int) end));
            }
            p = (int) end;
        }
        return modules;
    }

    /** Whether core module {@code module} exports a function named {@code name} (its export section, id 7). */
    static boolean exportsFunction(byte[] module, String name) {
        if (module.length < 8 || module[0] != 0 || module[1] != 'a' || module[2] != 's' || module[3] != 'm') {
            throw new GuardException("malformed component: a core module without the wasm header");
        }
        int p = 8;
        while (p < module.length) {
            int id = module[p] & 0xff;
            long[] size = leb128(module, p + 1);
            long end = size[1] + size[0];
            if (end > module.length) {
                throw new GuardException("truncated core module");
            }
            if (id == 7) {
                return exportSectionHas(module, (int) size[1], (int) end, name);
            }
            p = (int) end;
        }
        return false;
    }

    private static boolean exportSectionHas(byte[] m, int start, int end, String name) {
        long[] count = leb128(m, start);
        int p = (int) count[1];
        for (long i = 0; i < count[0]; i++) {
            long[] length = leb128(m, p);
            long nameEnd = length[1] + length[0];
            if (nameEnd >= end) {
                throw new GuardException("truncated export section");
            }
            String exported = new String(m, (int) length[1], (int) length[0], StandardCharsets.UTF_8);
            int kind = m[(int) nameEnd] & 0xff;
            long[] index = leb128(m, (int) nameEnd + 1);
            if (kind == 0 && exported.equals(name)) {
                return true;
            }
            p = (int) index[1];
        }
        return false;
    }

    /** An unsigned LEB128 u32 at {@code p}: {value, next offset}. */
    static long[] leb128(byte[] bytes, int p) {
        long value = 0;
        for (int shift = 0; shift < 35; shift += 7) {
            if (p >= bytes.length) {
                throw new GuardException("truncated component: a size runs past the end");
            }
            int b = bytes[p++] & 0xff;
            value |= (long) (b & 0x7f) << shift;
            if ((b & 0x80) == 0) {
                if (value > 0xffffffffL) {
                    break;
                }
                return new long[] {value, p};
            }
        }
        throw new GuardException("malformed component: a size is not a u32");
    }
}
