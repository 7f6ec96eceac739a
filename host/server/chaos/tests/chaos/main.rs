//! The chaos campaign's integration tests, one binary: the checker on
//! recorded histories, the client pipeline against stand-in servers, and the
//! network namespaces (as root).

mod checker;
mod netns;
mod pipeline;
