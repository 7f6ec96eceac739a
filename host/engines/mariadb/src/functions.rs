//! The SQL functions (`CREATE FUNCTION name RETURNS .. SONAME
//! 'libfencing_mariadb.so'`, `sql/install.sql`).
//!
//! Any account may call any UDF in MariaDB, so none of these holds
//! authority: each is a pure function of its arguments (a decision, a
//! message, generated SQL, a check of keys). What needs a right (protecting
//! a table, the keys, a reset) is a procedure in the `fencing` schema that
//! only an administrator may run, and the fences are rows only the triggers'
//! definer writes.
//!
//! Every body runs inside [`guarded`]: a panic becomes the function's
//! failure answer, never an abort of mariadbd. A bad argument that is a
//! constant fails the statement at `init` with the rule's message; one that
//! comes from a row answers JSON with `"error"` (the decision functions) or
//! its verdict code (the triggers' functions).

use crate::answer;
use crate::args::{self, ArgError, Value};
use crate::boundary::guarded;
use crate::decide::{self, code};
use crate::guard;
use crate::triggers::{EVENTS, Spec};
use fencing_runtime::{Fence, Policy, Sequencer};
use udf::prelude::*;

/// Longest answer a string function gives, for the result's declared width.
const ANSWER_WIDTH: u64 = 2048;

/// The arguments as values (missing ones are NULL).
fn values<'a, const N: usize>(args: &'a ArgList<'a, Process>) -> [Value<'a>; N] {
    std::array::from_fn(|i| args.get(i).map_or(Value::Null, |a| Value::from(a.value())))
}

/// The same at `init`: constant arguments have their value, others are NULL.
fn init_values<'a, const N: usize>(args: &'a ArgList<'a, Init>) -> [Value<'a>; N] {
    std::array::from_fn(|i| args.get(i).map_or(Value::Null, |a| Value::from(a.value())))
}

/// Refuses a call with a number of arguments outside `range`.
fn arity(name: &str, args: &ArgList<Init>, range: std::ops::RangeInclusive<usize>, usage: &str) -> Result<(), String> {
    if range.contains(&args.len()) {
        Ok(())
    } else {
        Err(format!("{name} takes {usage}; got {} arguments", args.len()))
    }
}

/// An init error for a constant argument the rules refuse. MariaDB shows
/// 80 characters of it: the rule's code comes first.
fn constant(checked: Result<(), ArgError>) -> Result<(), String> {
    checked.map_err(|e| format!("{}: {}", e.code, e.message))
}

/// The decision functions' arguments: the stored fence, the presented lock,
/// token and sequence (tokens as text may be any u64: these functions store nothing).
struct Plain {
    current: Option<Fence>,
    presented: Sequencer,
}

fn plain(v: &[Value<'_>], require: bool) -> Result<Option<Plain>, ArgError> {
    let current_lock = args::name(v[0], "current_lock")?;
    let high_water = args::number(v[1], "current_high_water", true)?;
    let current_sequence = args::number(v[2], "current_sequence", true)?;
    let lock = args::name(v[3], "lock")?;
    let token = args::number(v[4], "token", true)?;
    let sequence = args::number(v[5], "sequence", true)?;
    let (Some(lock), Some(token)) = (lock, token) else {
        return if require {
            Err(ArgError::missing(if v[3] == Value::Null { "lock" } else { "token" }))
        } else {
            Ok(None)
        };
    };
    let current = match (current_lock, high_water) {
        (None, _) => None,
        (Some(lock), Some(high_water)) => Some(Fence { lock, high_water, sequence: current_sequence }),
        (Some(_), None) if require => return Err(ArgError::missing("current_high_water")),
        (Some(_), None) => return Ok(None),
    };
    Ok(Some(Plain { current, presented: Sequencer { lock, token, sequence } }))
}

/// `fencing_admit(current_lock, current_high_water, current_sequence, lock,
/// token [, sequence [, policy]])`: the component's decision on plain
/// values, as JSON. `current_lock` NULL: no fence yet.
pub struct FencingAdmit {
    out: String,
}

const ADMIT_USAGE: &str = "(current_lock, current_high_water, current_sequence, lock, token [, sequence [, policy]])";

impl FencingAdmit {
    fn answer(v: &[Value<'_>; 7]) -> String {
        let parsed = plain(v, true).and_then(|p| Ok((p, args::policy(v[6])?)));
        match parsed {
            Err(e) => answer::arg_error(&e),
            Ok((None, _)) => answer::arg_error(&ArgError::missing("lock")),
            Ok((Some(p), policy)) => match guard::decide_plain(p.current.as_ref(), &p.presented, policy) {
                Ok(d) => answer::decision(&d.map_err(fencing_runtime::proof::SignedRejection::Fence)),
                Err(why) => answer::failure(&why),
            },
        }
    }
}

#[register(name = "fencing_admit")]
impl BasicUdf for FencingAdmit {
    type Returns<'a> = &'a str;

    fn init(cfg: &UdfCfg<Init>, args: &ArgList<Init>) -> Result<Self, String> {
        guarded(Err, || {
            arity("fencing_admit", args, 5..=7, ADMIT_USAGE)?;
            let v: [Value<'_>; 7] = init_values(args);
            constant(plain(&v, false).map(|_| ()))?;
            constant(args::policy(v[6]).map(|_| ()))?;
            cfg.set_max_len(ANSWER_WIDTH);
            Ok(FencingAdmit { out: String::new() })
        })
    }

    fn process<'a>(
        &'a mut self,
        _cfg: &UdfCfg<Process>,
        args: &ArgList<Process>,
        _error: Option<NonZeroU8>,
    ) -> Result<Self::Returns<'a>, ProcessError> {
        self.out = guarded(|m| answer::failure(&m), || FencingAdmit::answer(&values(args)));
        Ok(&self.out)
    }
}

/// `fencing_admit_signed(current_lock, current_high_water, current_sequence,
/// lock, token, sequence, proof, verify_keys [, policy])`: the decision of a
/// signed write: the proof (hex) must hold under `verify_keys` (`<id>
/// <algorithm> <hex>`, by line or comma) before the fence is consulted.
pub struct FencingAdmitSigned {
    out: String,
}

const SIGNED_USAGE: &str =
    "(current_lock, current_high_water, current_sequence, lock, token, sequence, proof, verify_keys [, policy])";

impl FencingAdmitSigned {
    fn answer(v: &[Value<'_>; 9]) -> String {
        let parsed = (|| {
            let p = plain(v, true)?.ok_or_else(|| ArgError::missing("lock"))?;
            let proof = args::proof(v[6], "proof")?;
            let keys = args::text(v[7], "verify_keys")?;
            Ok::<_, ArgError>((p, proof, keys, args::policy(v[8])?))
        })();
        let (p, proof, keys, policy) = match parsed {
            Ok(parsed) => parsed,
            Err(e) => return answer::arg_error(&e),
        };
        let verifier = match guard::verifier(keys) {
            Ok(Some(verifier)) => verifier,
            Ok(None) => {
                return answer::failure("verify_keys: no keys given: a signed decision needs the lock service's keys");
            }
            Err(why) => return answer::failure(&why),
        };
        match guard::guard(None)
            .and_then(|g| guard::decide(&g, Some(&verifier), p.current.as_ref(), &p.presented, &proof, policy))
        {
            Ok(d) => answer::decision(&d),
            Err(why) => answer::failure(&why),
        }
    }
}

#[register(name = "fencing_admit_signed")]
impl BasicUdf for FencingAdmitSigned {
    type Returns<'a> = &'a str;

    fn init(cfg: &UdfCfg<Init>, args: &ArgList<Init>) -> Result<Self, String> {
        guarded(Err, || {
            arity("fencing_admit_signed", args, 8..=9, SIGNED_USAGE)?;
            let v: [Value<'_>; 9] = init_values(args);
            constant(plain(&v, false).map(|_| ()))?;
            constant(args::proof(v[6], "proof").map(|_| ()))?;
            constant(args::text(v[7], "verify_keys").map(|_| ()))?;
            constant(args::policy(v[8]).map(|_| ()))?;
            cfg.set_max_len(ANSWER_WIDTH);
            Ok(FencingAdmitSigned { out: String::new() })
        })
    }

    fn process<'a>(
        &'a mut self,
        _cfg: &UdfCfg<Process>,
        args: &ArgList<Process>,
        _error: Option<NonZeroU8>,
    ) -> Result<Self::Returns<'a>, ProcessError> {
        self.out = guarded(|m| answer::failure(&m), || FencingAdmitSigned::answer(&values(args)));
        Ok(&self.out)
    }
}

/// `fencing_check(resource, fence_lock, fence_high_water, fence_sequence,
/// lock, token, sequence, policy, verify_keys, proof, plugin)`: the
/// protected tables' triggers' decision of one row, as a verdict code
/// (`decide::code`; 0: admitted). Pure: it reads and writes nothing.
pub struct FencingCheck;

#[register(name = "fencing_check")]
impl BasicUdf for FencingCheck {
    type Returns<'a> = i64;

    fn init(_cfg: &UdfCfg<Init>, args: &ArgList<Init>) -> Result<Self, String> {
        guarded(Err, || {
            arity("fencing_check", args, 11..=11, "the triggers' 11 arguments (docs/mariadb.md)")?;
            Ok(FencingCheck)
        })
    }

    fn process<'a>(
        &'a mut self,
        _cfg: &UdfCfg<Process>,
        args: &ArgList<Process>,
        _error: Option<NonZeroU8>,
    ) -> Result<Self::Returns<'a>, ProcessError> {
        Ok(guarded(
            |m| {
                decide::note_failure(&m);
                code::GUARD_FAILURE
            },
            || decide::check(&values(args)),
        ))
    }
}

/// `fencing_refusal(code, table, <fencing_check's 11 arguments>, carrier)`:
/// the message of the refusal `fencing_check` answered `code` for.
pub struct FencingRefusal {
    out: String,
}

#[register(name = "fencing_refusal")]
impl BasicUdf for FencingRefusal {
    type Returns<'a> = &'a str;

    fn init(cfg: &UdfCfg<Init>, args: &ArgList<Init>) -> Result<Self, String> {
        guarded(Err, || {
            arity("fencing_refusal", args, 14..=14, "(code, table, <fencing_check's 11 arguments>, carrier)")?;
            cfg.set_max_len(512);
            Ok(FencingRefusal { out: String::new() })
        })
    }

    fn process<'a>(
        &'a mut self,
        _cfg: &UdfCfg<Process>,
        args: &ArgList<Process>,
        _error: Option<NonZeroU8>,
    ) -> Result<Self::Returns<'a>, ProcessError> {
        self.out = guarded(
            |m| format!("fencing: guard_failure: {m}"),
            || {
                let all: [Value<'_>; 14] = values(args);
                let code = args::int(all[0], "code").ok().flatten().unwrap_or(code::GUARD_FAILURE);
                let table = args::text(all[1], "table").ok().flatten().unwrap_or("?");
                let carrier = args::text(all[13], "carrier").ok().flatten();
                let row: [Value<'_>; 11] = std::array::from_fn(|i| all[i + 2]);
                decide::refusal(code, table, &row, carrier)
            },
        );
        Ok(&self.out)
    }
}

/// `fencing_keys_check(verify_keys)`: NULL when the text is a valid set of
/// verifier keys (or empty: signing off), else why not.
pub struct FencingKeysCheck {
    out: String,
}

#[register(name = "fencing_keys_check")]
impl BasicUdf for FencingKeysCheck {
    type Returns<'a> = Option<&'a str>;

    fn init(cfg: &UdfCfg<Init>, args: &ArgList<Init>) -> Result<Self, String> {
        guarded(Err, || {
            arity("fencing_keys_check", args, 1..=1, "(verify_keys)")?;
            cfg.set_max_len(512);
            Ok(FencingKeysCheck { out: String::new() })
        })
    }

    fn process<'a>(
        &'a mut self,
        _cfg: &UdfCfg<Process>,
        args: &ArgList<Process>,
        _error: Option<NonZeroU8>,
    ) -> Result<Self::Returns<'a>, ProcessError> {
        let problem = guarded(Some, || {
            let [v]: [Value<'_>; 1] = values(args);
            match args::text(v, "verify_keys") {
                Err(e) => Some(e.message),
                Ok(t) if t.is_none_or(|t| t.trim().is_empty()) => None,
                Ok(t) => guard::parse_verifier(t.unwrap_or_default()).err(),
            }
        });
        Ok(problem.map(|p| {
            self.out = p;
            self.out.as_str()
        }))
    }
}

/// `fencing_guard_info([plugin])`: which component decides (the embedded
/// one, or the plugin at the path): source, contract, size, digest, call path.
pub struct FencingGuardInfo {
    out: String,
}

#[register(name = "fencing_guard_info")]
impl BasicUdf for FencingGuardInfo {
    type Returns<'a> = &'a str;

    fn init(cfg: &UdfCfg<Init>, args: &ArgList<Init>) -> Result<Self, String> {
        guarded(Err, || {
            arity("fencing_guard_info", args, 0..=1, "([plugin])")?;
            cfg.set_max_len(1024);
            Ok(FencingGuardInfo { out: String::new() })
        })
    }

    fn process<'a>(
        &'a mut self,
        _cfg: &UdfCfg<Process>,
        args: &ArgList<Process>,
        _error: Option<NonZeroU8>,
    ) -> Result<Self::Returns<'a>, ProcessError> {
        self.out = guarded(
            |m| m,
            || {
                let [v]: [Value<'_>; 1] = values(args);
                let plugin = args::text(v, "plugin").ok().flatten();
                guard::info(plugin).unwrap_or_else(|why| format!("unavailable: {why}"))
            },
        );
        Ok(&self.out)
    }
}

/// `fencing_trigger_sql(event, schema, table, resource_column,
/// resource_is_text, token_column, lock_column, sequence_column, policy,
/// fence_in_row)`: the `CREATE TRIGGER` statement `fencing.protect` runs for
/// `event` (`bi`, `bu`, `bd`, `ai`); NULL when the table has no such trigger.
pub struct FencingTriggerSql {
    out: String,
}

impl FencingTriggerSql {
    fn sql(v: &[Value<'_>; 10]) -> Result<Option<String>, String> {
        let text = |i: usize, what: &str| -> Result<Option<String>, String> {
            let t = args::text(v[i], what).map_err(|e| e.message)?;
            match t {
                Some(t) => match crate::triggers::unusable(t) {
                    Some(why) => Err(format!("{what} {t:?} {why}")),
                    None => Ok(Some(t.to_string())),
                },
                None => Ok(None),
            }
        };
        let need = |i: usize, what: &str| text(i, what)?.ok_or_else(|| format!("{what} is NULL"));
        let event = need(0, "event")?;
        if !EVENTS.contains(&event.as_str()) {
            return Err(format!("event {event:?} is not one of {EVENTS:?}"));
        }
        let policy = args::policy(v[8]).map_err(|e| e.message)?;
        let spec = Spec {
            schema: need(1, "schema")?,
            table: need(2, "table")?,
            resource: need(3, "resource column")?,
            resource_is_text: args::int(v[4], "resource_is_text").map_err(|e| e.message)?.unwrap_or(0) != 0,
            token: need(5, "token column")?,
            lock: text(6, "lock column")?,
            sequence: text(7, "sequence column")?,
            policy: policy_name(policy).to_string(),
            fence_in_row: args::int(v[9], "fence_in_row").map_err(|e| e.message)?.unwrap_or(0) != 0,
        };
        Ok(spec.trigger(&event))
    }
}

fn policy_name(p: Policy) -> &'static str {
    p.name()
}

#[register(name = "fencing_trigger_sql")]
impl BasicUdf for FencingTriggerSql {
    type Returns<'a> = Option<&'a str>;

    fn init(cfg: &UdfCfg<Init>, args: &ArgList<Init>) -> Result<Self, String> {
        guarded(Err, || {
            arity(
                "fencing_trigger_sql",
                args,
                10..=10,
                "(event, schema, table, resource_column, resource_is_text, token_column, lock_column, sequence_column, policy, fence_in_row)",
            )?;
            cfg.set_max_len(65_535);
            Ok(FencingTriggerSql { out: String::new() })
        })
    }

    fn process<'a>(
        &'a mut self,
        _cfg: &UdfCfg<Process>,
        args: &ArgList<Process>,
        _error: Option<NonZeroU8>,
    ) -> Result<Self::Returns<'a>, ProcessError> {
        // An error answers a statement that cannot run, naming the problem.
        let sql = guarded(
            |m| Some(format!("SIGNAL SQLSTATE 'FN010' SET MESSAGE_TEXT = 'fencing: {}'", m.replace('\'', "''"))),
            || match FencingTriggerSql::sql(&values(args)) {
                Ok(sql) => sql,
                Err(why) => {
                    let why: String = why.chars().take(400).collect();
                    Some(format!(
                        "SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencing: protect: {}'",
                        why.replace('\'', "''")
                    ))
                }
            },
        );
        Ok(sql.map(|s| {
            self.out = s;
            self.out.as_str()
        }))
    }
}
