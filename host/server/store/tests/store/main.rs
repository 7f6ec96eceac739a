//! The fenced store's integration tests, one binary: the redb engine
//! against the shared conformance checks (`fencing-testkit`), with the
//! component and the native rules, and its limits, quota and reopening.

mod storage_redb;
