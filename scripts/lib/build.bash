# shellcheck shell=bash
# The Rust builds a test script needs, sourced by the scripts/test-* scripts.
#
# cargo resolves features per invocation: `cargo build -p fencing`, `-p
# fencing-redis` and `cargo test --workspace` each pick another feature set
# for shared dependencies (anyhow, serde, smallvec, ...), and each compiles
# wasmtime and cranelift anew. scripts/test therefore builds the workspace
# once, with the feature set of its Rust tests, and sets
# FENCING_WORKSPACE_BUILT=1; under it these functions build nothing. Run on
# their own, the scripts build just what they use.
#
# SHARED_BUILD adds host/workspace-hack to a build: one feature set for
# shared dependencies whichever packages it selects, so clippy and cargo doc
# share their checked crates, and the SQLite and PostgreSQL extensions' debug
# builds (scripts/sqlite-extension --debug, scripts/pg-extension --debug)
# reuse the workspace's compiled wasmtime instead of compiling their own.
SHARED_BUILD=(--features fencing/shared-build)

# The fencing binary (or the package named), unless scripts/test built the workspace.
build_package() {
  [ -n "${FENCING_WORKSPACE_BUILT:-}" ] && return 0
  cargo build --quiet --locked -p "${1:-fencing}"
}

# Where scripts/sqlite-extension --debug leaves the extension (run from the root).
sqlite_extension_debug_path() {
  echo "${CARGO_TARGET_DIR:-$PWD/target}/debug/libfencing_sqlite.so"
}

# The SQLite extension's debug build (scripts/sqlite-extension --debug); its
# path on standard output. Under FENCING_WORKSPACE_BUILT scripts/test built it
# already, before the workspace: fencing-rules is a cdylib too, so its
# library's file name carries no hash, and the SQLite workspace's build of it
# (a build of another workspace, so other metadata) would overwrite the
# workspace's and make cargo rebuild everything above it.
sqlite_extension_debug() {
  local lib
  lib="$(sqlite_extension_debug_path)"
  if [ -n "${FENCING_WORKSPACE_BUILT:-}" ] && [ -f "$lib" ]; then
    echo "$lib"
  else
    scripts/sqlite-extension --debug
  fi
}

# What scripts/test builds once: every library (the Redis module too), the
# binary and every test, as `cargo test --workspace` will want them.
build_workspace() {
  cargo build --locked --workspace --exclude fencing-postgres --lib --bins --tests "${SHARED_BUILD[@]}"
}
