//! The names of the keys the module keeps, all under `fencing:`, each in the
//! hash slot of the key or lock it belongs to, so that in a cluster a command
//! and everything it touches live on one node and move together when slots
//! are resharded.
//!
//! A key that has a hash tag (`user:{42}:cart`) shares its tag:
//! `fencing:fence:user:{42}:cart`. Any other key is wrapped in one:
//! `orders:invoice` has its fence at `fencing:fence:{orders:invoice}`. A name
//! with no tag that contains `}`, or an empty one, cannot be wrapped; its
//! keys are named plainly, which is only right outside a cluster, so in a
//! cluster such names are refused ([`colocated`]).
//!
//! | key | type | holds |
//! |---|---|---|
//! | `fencing:fence:<key>` | hash | `lock`, `high_water`, `sequence`: the key's fence |
//! | `fencing:resets:<key>` | stream | one entry per operator reset of the key's fence |
//! | `fencing:lock:<lock>` | hash with an expiry | `holder`, `lease`, `token` of the current lease |
//! | `fencing:token:<lock>` | integer | the last token issued for the lock |

use redis_module::{Context, ContextFlags, RedisError, RedisString};

/// The prefix of every key the module keeps; ordinary fenced writes refuse it.
pub const PREFIX: &[u8] = b"fencing:";

/// `name`'s hash tag as Redis Cluster reads it: the bytes between the first
/// `{` and the first `}` after it, if there are any.
fn hash_tag(name: &[u8]) -> Option<&[u8]> {
    let open = name.iter().position(|&b| b == b'{')?;
    let len = name[open + 1..].iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &name[open + 1..open + 1 + len])
}

/// Whether `prefix` + `name` can be placed in `name`'s slot.
fn can_share_slot(name: &[u8]) -> bool {
    hash_tag(name).is_some() || (!name.is_empty() && !name.contains(&b'}'))
}

/// `prefix` + `name`, tagged so it hashes to `name`'s slot where it can be.
fn slot_mate(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + name.len() + 2);
    key.extend_from_slice(prefix);
    if hash_tag(name).is_some() || !can_share_slot(name) {
        key.extend_from_slice(name);
    } else {
        key.push(b'{');
        key.extend_from_slice(name);
        key.push(b'}');
    }
    key
}

/// Refuses, in a cluster, a name whose keys could not share its slot.
pub fn colocated(ctx: &Context, what: &str, name: &[u8]) -> Result<(), RedisError> {
    if can_share_slot(name) || !ctx.get_flags().contains(ContextFlags::CLUSTER) {
        return Ok(());
    }
    Err(RedisError::String(format!(
        "ERR {what} cannot share its hash slot with the module's keys in a cluster: give it a hash tag ({{...}})"
    )))
}

/// The name of the fence of `key`, a key a fenced command may write: not
/// one of the module's own, and able to share its slot with its fence.
pub fn fence_of_writable(ctx: &Context, key: &RedisString) -> Result<RedisString, RedisError> {
    if key.as_slice().starts_with(PREFIX) {
        return Err(RedisError::Str("ERR keys under the fencing: prefix are the module's"));
    }
    colocated(ctx, "the key", key.as_slice())?;
    Ok(fence(ctx, key.as_slice()))
}

/// The name of `key`'s fence.
pub fn fence(ctx: &Context, key: &[u8]) -> RedisString {
    ctx.create_string(slot_mate(b"fencing:fence:", key))
}

/// The stream recording the operator's resets of `key`'s fence.
pub fn resets(ctx: &Context, key: &[u8]) -> RedisString {
    ctx.create_string(slot_mate(b"fencing:resets:", key))
}

/// The hash of `lock`'s current lease.
pub fn lease(ctx: &Context, lock: &str) -> RedisString {
    ctx.create_string(slot_mate(b"fencing:lock:", lock.as_bytes()))
}

/// The counter of `lock`'s tokens.
pub fn tokens(ctx: &Context, lock: &str) -> RedisString {
    ctx.create_string(slot_mate(b"fencing:token:", lock.as_bytes()))
}
