//! The JSON bodies of both HTTP APIs, one definition each: what the server
//! decodes and answers, and what the clients and the chaos campaign send.
//! Decoding with field names in errors and validation happen in `http/`;
//! the rule for names both APIs share is `names.rs`, how an unsigned
//! 64-bit field reads a JSON number `number.rs`.

pub mod locks;
pub mod names;
pub mod number;
pub mod storage;
