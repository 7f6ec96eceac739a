//! `fencing`: the reference fencing server and its client commands. See `fencing --help`.

use std::process::ExitCode;

fn main() -> ExitCode {
    fencing_cli::main()
}
