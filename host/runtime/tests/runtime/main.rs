//! fencing-runtime's integration tests, one binary: the native rules against
//! the component on both call paths (`differential`), the verdict codes of
//! batches and streams (`wasm_codes`), a misbehaving plugin failing closed
//! within its limits (`wasm_faults`), and loading, checking and caching
//! plugins (`wasm_plugin`), signed writes on every guard against the
//! shared proof vectors (`signed`), and what a host accepts against the
//! shared argument vectors (`arguments`).

mod arguments;
mod differential;
mod signed;
mod wasm_codes;
mod wasm_faults;
mod wasm_plugin;
