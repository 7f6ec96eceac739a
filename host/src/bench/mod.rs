//! Load generators behind `fencing bench`.
//!
//! - [`locks`]: acquire+release cycles over loopback HTTP against the
//!   embedded backend and, when given, etcd.

pub mod locks;
