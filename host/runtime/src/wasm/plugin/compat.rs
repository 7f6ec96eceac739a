//! Whether a component implements a version of the contract this runtime
//! speaks: the `fencing:guard/check` export's version, by semver rules (for
//! 0.x the minor version is the breaking one), and no imports at all (a guard
//! must be pure: no clock, no I/O, no randomness can reach it).

use super::{INTERFACE, PACKAGE, PluginInfo, VERSION};

/// Checks the export name's version against [`VERSION`] by semver rules
/// (for 0.x, the minor version is the breaking one) and that nothing is imported.
pub(super) fn compatibility_problem(info: &PluginInfo) -> Option<String> {
    let Some(export) = &info.package else {
        return Some(format!(
            "the component does not export `{PACKAGE}/{INTERFACE}` (exports: {})",
            if info.exports.is_empty() { "none".into() } else { info.exports.join("; ") }
        ));
    };
    let version = export.split_once('@').map(|(_, v)| v);
    let Some(version) = version else {
        return Some(format!("`{export}` carries no version; this host needs {PACKAGE}@{}", version_string()));
    };
    let parts: Vec<u64> = version.split(['.', '-', '+']).take(3).filter_map(|p| p.parse().ok()).collect();
    let [major, minor, _patch] = parts[..] else {
        return Some(format!("`{export}` has an unreadable version `{version}`"));
    };
    let (want_major, want_minor, _) = VERSION;
    let compatible = if want_major == 0 { major == 0 && minor == want_minor } else { major == want_major };
    if !compatible {
        return Some(format!(
            "the plugin implements {PACKAGE}@{version}, but this host speaks {PACKAGE}@{} (compatible: {})",
            version_string(),
            if want_major == 0 { format!("0.{want_minor}.x") } else { format!("{want_major}.x") }
        ));
    }
    if !info.imports.is_empty() {
        return Some(format!(
            "the plugin imports {}, but this host provides no imports (a guard must be pure)",
            info.imports.join(", ")
        ));
    }
    None
}

fn version_string() -> String {
    let (a, b, c) = VERSION;
    format!("{a}.{b}.{c}")
}
