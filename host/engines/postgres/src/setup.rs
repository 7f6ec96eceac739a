//! A protected table's trigger arguments (its resource, token, lock and
//! sequence columns, policy, and where its fences live), resolved against
//! the table's columns once per backend and checked against the current
//! descriptor on every use.

use crate::args::{bad_argument, policy};
use crate::row::{Column, column};
use fencing_runtime::Policy;
use pgrx::prelude::*;
use pgrx::{PgTrigger, PgTriggerError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::rc::Rc;

/// A trigger's arguments, resolved against its table's columns.
pub struct Setup {
    /// The resource, token, lock and sequence column names ("": none).
    pub names: [String; 4],
    pub resource: Column,
    pub token: Column,
    pub lock: Option<Column>,
    pub sequence: Option<Column>,
    pub policy: Policy,
    /// The table carries its fences in its rows (`fence_in_row`).
    pub in_row: bool,
}

thread_local! {
    /// Setups by trigger OID: a trigger's arguments never change, and each
    /// use checks the columns against the table's current descriptor.
    static SETUPS: RefCell<HashMap<pg_sys::Oid, Rc<Setup>>> = RefCell::new(HashMap::new());
}

impl Setup {
    /// Whether every column is still where, and of the type, it was.
    fn matches(&self, desc: pg_sys::TupleDesc) -> bool {
        // SAFETY: the descriptor belongs to the firing relation; `natts` entries follow it.
        let attrs = unsafe { (*desc).attrs.as_slice((*desc).natts as usize) };
        let columns = [Some(self.resource), Some(self.token), self.lock, self.sequence];
        columns.iter().zip(&self.names).all(|(c, name)| match c {
            None => true,
            Some(c) => attrs.get(c.attnum as usize - 1).is_some_and(|a| {
                // SAFETY: attname is a NUL-terminated NameData.
                let attname = unsafe { CStr::from_ptr(a.attname.data.as_ptr()) };
                !a.attisdropped && a.atttypid == c.type_oid && attname.to_bytes() == name.as_bytes()
            }),
        })
    }
}

/// The firing trigger's setup, resolved once per backend.
pub fn setup(
    trigger: &PgTrigger<'_>,
    relid: pg_sys::Oid,
    desc: pg_sys::TupleDesc,
) -> Result<Rc<Setup>, PgTriggerError> {
    // SAFETY: the trigger description belongs to the firing trigger.
    let oid = unsafe { (*trigger.trigger_data().tg_trigger).tgoid };
    if let Some(s) = SETUPS.with(|m| m.borrow().get(&oid).cloned())
        && s.matches(desc)
    {
        return Ok(s);
    }
    let args = trigger.extra_args()?;
    let (names, policy_name, in_row) = match &args[..] {
        [r, t, l, s, p, mode] => ([r, t, l, s], p, mode == "row"),
        _ => bad_argument(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "fencing: protect the table again".into()),
    };
    let setup = Rc::new(Setup {
        resource: column(relid, names[0]).expect("the resource column is required"),
        token: column(relid, names[1]).expect("the token column is required"),
        lock: column(relid, names[2]),
        sequence: column(relid, names[3]),
        policy: policy(policy_name),
        in_row,
        names: names.map(String::clone),
    });
    SETUPS.with(|m| m.borrow_mut().insert(oid, setup.clone()));
    Ok(setup)
}
