//! `fencing`: the reference fencing host and its client commands. See `fencing --help`.

use std::process::ExitCode;

fn main() -> ExitCode {
    fencing_host::cli::main()
}
