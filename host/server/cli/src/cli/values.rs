//! Flag values that name a domain type (`--mutation`, `--token-mode`): the
//! command line's own enums, converted in one place, so the API and server
//! types carry no command-line derives.

use fencing_api::wire::storage::Mutation;
use fencing_server::locks::TokenMode;

/// `--mutation`: how a write changes its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MutationArg {
    /// Replace the object with the bytes.
    Put,
    /// Append the bytes to the object (creating it if absent).
    Append,
    /// Remove the object (bytes are ignored).
    Delete,
}

impl From<MutationArg> for Mutation {
    fn from(arg: MutationArg) -> Mutation {
        match arg {
            MutationArg::Put => Mutation::Put,
            MutationArg::Append => Mutation::Append,
            MutationArg::Delete => Mutation::Delete,
        }
    }
}

/// `--token-mode`: whether tokens count per lock or across all locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TokenModeArg {
    /// Each lock has its own sequence (`1, 2, 3` on a fresh service).
    #[default]
    PerLock,
    /// One counter for every lock: a token also orders grants across locks.
    Global,
}

impl From<TokenModeArg> for TokenMode {
    fn from(arg: TokenModeArg) -> TokenMode {
        match arg {
            TokenModeArg::PerLock => TokenMode::PerLock,
            TokenModeArg::Global => TokenMode::Global,
        }
    }
}
