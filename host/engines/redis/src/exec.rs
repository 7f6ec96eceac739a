//! `FENCING.EXEC key lock token [SEQ n] [POLICY p] [PROOF hex] COMMAND key arg...`:
//! any Redis write command on the fenced key, decided as the other fenced
//! writes are and run with the caller's ACL rights, as a script would run it.
//!
//! What is replicated is what the command did (Redis replicates `SPOP` as
//! the `SREM` it made, for one) and then `FENCING.APPLY FENCE`.
//!
//! What it refuses, before anything is decided:
//! - a command that is not a write (`GET`, `TYPE`): a read must not raise
//!   the fence;
//! - a module's command (the module's own `FENCING.*` included): what a
//!   module command touches is not known from its declared keys;
//! - a command whose first argument is not the fenced key, or that touches
//!   any other key, or none (`COMMAND GETKEYS`): a fenced write writes
//!   nothing its fence does not guard;
//! - anything a script may not run (`S`: `MULTI`, `EVAL`, blocking forms).

use crate::boundary::{Answer, Refusal, Reply};
use crate::call::{self, AS_CALLER, LOCAL};
use crate::fenced::{fenced, presented};
use crate::replicate::{Effect, emit, selected_db};
use redis_module::{Context, RedisString};

/// The flags Redis gives `command` (`COMMAND INFO`), or why it cannot run here.
fn flags(ctx: &Context, command: &RedisString) -> Result<Vec<Vec<u8>>, Refusal> {
    let info = ctx.create_string("INFO");
    let reply = call::call(ctx, LOCAL, b"COMMAND", &[&info, command])?;
    let unknown =
        || Refusal::new(format!("ERR FENCING.EXEC: unknown command '{}'", crate::text::escape(command.as_slice())));
    let entries = reply.elements();
    let entry = entries.first().ok_or_else(unknown)?.elements();
    let flags = entry.get(2).ok_or_else(unknown)?.elements();
    Ok(flags.iter().filter_map(|f| f.bytes().map(<[u8]>::to_vec)).collect())
}

/// Refuses what `FENCING.EXEC` may not run (see the module docs above).
fn allowed(ctx: &Context, key: &RedisString, command: &RedisString, args: &[&RedisString]) -> Result<(), Refusal> {
    let name = command.as_slice();
    let shown = crate::text::escape(name);
    if name.len() >= 8 && name[..8].eq_ignore_ascii_case(b"fencing.") {
        return Err(Refusal::new(format!("ERR FENCING.EXEC runs Redis's own write commands, not {shown}")));
    }
    let flags = flags(ctx, command)?;
    if flags.iter().any(|f| f == b"module") {
        return Err(Refusal::new(format!(
            "ERR FENCING.EXEC runs Redis's own write commands, not a module's ({shown})"
        )));
    }
    if !flags.iter().any(|f| f == b"write") {
        return Err(Refusal::new(format!(
            "ERR FENCING.EXEC runs write commands; {shown} does not write (a read must not raise the fence)"
        )));
    }
    let getkeys = ctx.create_string("GETKEYS");
    let mut query: Vec<&RedisString> = vec![&getkeys, command];
    query.extend_from_slice(args);
    let keys = call::call(ctx, LOCAL, b"COMMAND", &query)
        .map_err(|_| Refusal::new("ERR the command writes no key: FENCING.EXEC runs a command on the fenced key"))?;
    let keys = keys.elements();
    if keys.is_empty() {
        return Err(Refusal::new("ERR the command writes no key: FENCING.EXEC runs a command on the fenced key"));
    }
    if keys.iter().any(|k| k.bytes() != Some(key.as_slice())) {
        return Err(Refusal::new("ERR the command touches keys other than the fenced key"));
    }
    Ok(())
}

/// `FENCING.EXEC key lock token [SEQ n] [POLICY p] [PROOF hex] COMMAND key arg...`
pub fn exec(ctx: &Context, args: &[RedisString]) -> Answer {
    let (p, [], rest) = presented(args, 0)? else { return Err(Refusal::Arity) };
    let [command, command_args @ ..] = rest else { return Err(Refusal::Arity) };
    if command_args.first().map(RedisString::as_slice) != Some(p.key.as_slice()) {
        return Err(Refusal::new("ERR the command's first argument must be the fenced key"));
    }
    let refs: Vec<&RedisString> = command_args.iter().collect();
    allowed(ctx, p.key, command, &refs)?;
    let db = selected_db(ctx);
    // What the command did is replicated by Redis (the call's `!`), then the fence.
    let reply = fenced(db, &p, || Ok(call::call(ctx, AS_CALLER, command.as_slice(), &refs)?))?;
    if let Some(fence) = crate::state::lock().map_err(Refusal::new)?.fence(db, p.key.as_slice()) {
        emit(ctx, Effect::Fence { key: p.key, fence });
    }
    Ok(Reply::Forward(reply))
}
