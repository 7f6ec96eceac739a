//! The `fencing.*` settings.
//!
//! `fencing.plugin_path` and `fencing.cache_dir` choose what decides, so
//! only a superuser may set them (in `postgresql.conf`, `ALTER SYSTEM`,
//! `ALTER DATABASE/ROLE ... SET`, or a superuser's own session).
//! `fencing.token`, `fencing.lock` and `fencing.sequence` are what a writing
//! transaction presents when the row cannot carry it (a DELETE, or an UPDATE
//! that does not set the token column); they are meant for `SET LOCAL`.
//!
//! Signed tokens: `fencing.verify_keys` (superuser-only, and shown only to
//! superusers, since HMAC keys are secrets) holds the lock service's
//! verifier keys; while it is set, every fenced write in the database must
//! present its grant's proof in `fencing.proof` (meant for `SET LOCAL`).

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;

/// A `.wasm` to run instead of the embedded component.
pub static PLUGIN_PATH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// Where compiled plugins are cached between backends.
pub static CACHE_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static TOKEN: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static LOCK: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static SEQUENCE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// The verifier keys every fenced write's proof must hold under, or unset.
pub static VERIFY_KEYS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// The proof (hex) the transaction's writes present.
pub static PROOF: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// Registers every setting with the server.
pub fn define() {
    GucRegistry::define_string_guc(
        c"fencing.plugin_path",
        c"A fencing:guard component to run instead of the embedded one.",
        c"Empty: the component built into the extension. The file is checked for compatibility when a backend \
          first needs it or when this setting changes; a file that cannot be loaded fails every fenced write \
          with SQLSTATE FN010.",
        &PLUGIN_PATH,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"fencing.cache_dir",
        c"Directory for compiled components, shared by backends.",
        c"Empty: each backend compiles the component on first use. Set: the compiled artifact is stored there, \
          keyed by the component's SHA-256 and the engine's settings, and later backends load it instead of compiling.",
        &CACHE_DIR,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"fencing.token",
        c"The fencing token this transaction presents when a row does not carry one.",
        c"Used by DELETE, by UPDATE statements that do not set the token column, and by INSERTs whose token \
          column is NULL. Decimal, 1 to 9223372036854775807. Meant for SET LOCAL.",
        &TOKEN,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"fencing.lock",
        c"The lock this transaction presents when the table has no lock column.",
        c"Without a lock column and without this setting, the lock is the resource's own name.",
        &LOCK,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"fencing.sequence",
        c"The sequence this transaction presents when a row does not carry one (DELETE).",
        c"Decimal, 0 to 9223372036854775807. Meant for SET LOCAL.",
        &SEQUENCE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"fencing.verify_keys",
        c"The lock service's verifier keys: while set, every fenced write must present a valid proof.",
        c"Keys as `<id> <algorithm> <hex>` (the lines of a verify file from `fencing admin keygen`), separated by \
          commas or newlines; several during a rotation. Empty: tokens are not signed. Keys that cannot be read \
          fail every fenced write with SQLSTATE FN010.",
        &VERIFY_KEYS,
        GucContext::Suset,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_string_guc(
        c"fencing.proof",
        c"The proof of the token this transaction presents (the grant's fencing_proof, in hex).",
        c"Needed while fencing.verify_keys is set: it must be the lock service's proof for the presented lock \
          and token. Meant for SET LOCAL.",
        &PROOF,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// A string setting's value, `None` when unset or empty.
pub fn get(setting: &GucSetting<Option<CString>>) -> Option<String> {
    setting.get().map(|s| s.to_string_lossy().into_owned()).filter(|s| !s.is_empty())
}

/// `fencing.token`, `fencing.lock` and `fencing.sequence`, as set (or `None`).
pub fn presented() -> (Option<String>, Option<String>, Option<String>) {
    (get(&TOKEN), get(&LOCK), get(&SEQUENCE))
}
