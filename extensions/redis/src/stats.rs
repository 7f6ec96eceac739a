//! Counts of decided writes since the module loaded: `FENCING.STATS`.

use std::sync::atomic::{AtomicU64, Ordering};

static ADMITTED: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);

pub fn admitted() {
    ADMITTED.fetch_add(1, Ordering::Relaxed);
}

pub fn refused() {
    REFUSED.fetch_add(1, Ordering::Relaxed);
}

/// (admitted, refused) since the module loaded.
pub fn counts() -> (u64, u64) {
    (ADMITTED.load(Ordering::Relaxed), REFUSED.load(Ordering::Relaxed))
}

/// `FENCING.STATS` -> `[writes_admitted, N, writes_refused, M]`
pub fn command(_ctx: &redis_module::Context, _args: Vec<redis_module::RedisString>) -> redis_module::RedisResult {
    use redis_module::RedisValue;
    let (admitted, refused) = counts();
    Ok(RedisValue::Array(vec![
        RedisValue::SimpleStringStatic("writes_admitted"),
        RedisValue::Integer(admitted as i64),
        RedisValue::SimpleStringStatic("writes_refused"),
        RedisValue::Integer(refused as i64),
    ]))
}
