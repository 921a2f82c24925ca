//! The runtime cost limit: the program's tree is rewritten once, at compile time, so that every
//! call and every macro iteration goes through a metering function, which charges a thread-local
//! meter and aborts the evaluation once its limit or deadline is passed.

use std::cell::RefCell;
use std::time::Instant;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr};
use cel::common::types::{Kind, DYN_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, ExecutionError};

/// The metering function around a call: charges one unit plus the size of the call's result.
pub(crate) const CALL: &str = "@k1s_cost_call";
/// The metering function around one macro iteration: charges one unit.
pub(crate) const STEP: &str = "@k1s_cost_step";

/// Node ids of the metering calls, apart from the parser's.
const ID_BASE: u64 = 1 << 48;

/// Why an evaluation was abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abort {
    Cost,
    Time,
}

/// What an evaluation cost.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    pub(crate) used: u64,
    limit: u64,
    deadline: Option<Instant>,
    ticks: u32,
    pub(crate) aborted: Option<Abort>,
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// Runs `eval` with a meter of `limit` units that stops at `deadline`.
pub(crate) fn metered<T>(limit: u64, deadline: Instant, eval: impl FnOnce() -> T) -> (T, Meter) {
    let outer = METER.with(|m| m.borrow_mut().replace(Meter { limit, deadline: Some(deadline), ..Meter::default() }));
    let out = eval();
    let meter = METER.with(|m| std::mem::replace(&mut *m.borrow_mut(), outer)).unwrap_or_default();
    (out, meter)
}

fn charge(units: u64) -> Result<(), ExecutionError> {
    METER.with(|m| {
        let mut m = m.borrow_mut();
        let Some(meter) = m.as_mut() else { return Ok(()) };
        if let Some(abort) = meter.aborted {
            return Err(abort_error(abort));
        }
        meter.used = meter.used.saturating_add(units);
        if meter.used > meter.limit {
            meter.aborted = Some(Abort::Cost);
            return Err(abort_error(Abort::Cost));
        }
        meter.ticks = meter.ticks.wrapping_add(1);
        if meter.ticks % 64 == 0 && meter.deadline.is_some_and(|d| Instant::now() > d) {
            meter.aborted = Some(Abort::Time);
            return Err(abort_error(Abort::Time));
        }
        Ok(())
    })
}

fn abort_error(abort: Abort) -> ExecutionError {
    let message = match abort {
        Abort::Cost => crate::COST_LIMIT_EXCEEDED,
        Abort::Time => crate::EVAL_TIMED_OUT,
    };
    ExecutionError::function_error("cost", message)
}

fn meter_call<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = args.pop().ok_or_else(ExecutionError::missing_argument_or_target)?;
    let size = match value.get_type().kind() {
        Kind::String | Kind::Bytes => value.as_sizer().map_or(0, |s| *s.size().inner() as u64 / 10),
        Kind::List | Kind::Map => value.as_sizer().map_or(0, |s| *s.size().inner() as u64),
        _ => 0,
    };
    charge(1 + size)?;
    Ok(value)
}

fn meter_step<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = args.pop().ok_or_else(ExecutionError::missing_argument_or_target)?;
    charge(1)?;
    Ok(value)
}

/// Declares the metering functions.
pub(crate) fn register(env: &mut cel::Env) -> Result<(), DeclarationError> {
    env.add_overload(CALL, CALL, vec![DYN_TYPE], meter_call)?;
    env.add_overload(STEP, STEP, vec![DYN_TYPE], meter_step)
}

/// Rewrites `expr` so that each call and macro iteration is metered.
pub(crate) fn instrument(expr: IdedExpr) -> IdedExpr {
    let mut next = ID_BASE;
    rewrite(expr, &mut next)
}

fn wrap(func: &str, expr: IdedExpr, next: &mut u64) -> IdedExpr {
    *next += 1;
    IdedExpr { id: *next, expr: Expr::Call(CallExpr { func_name: func.to_owned(), target: None, args: vec![expr] }) }
}

fn rewrite(e: IdedExpr, next: &mut u64) -> IdedExpr {
    let IdedExpr { id, expr } = e;
    match expr {
        Expr::Call(mut call) => {
            call.target = call.target.map(|t| Box::new(rewrite(*t, next)));
            call.args = call.args.into_iter().map(|a| rewrite(a, next)).collect();
            wrap(CALL, IdedExpr { id, expr: Expr::Call(call) }, next)
        }
        Expr::Comprehension(mut c) => {
            c.iter_range = rewrite(c.iter_range, next);
            c.accu_init = rewrite(c.accu_init, next);
            c.loop_cond = rewrite(c.loop_cond, next);
            c.loop_step = wrap(STEP, rewrite(c.loop_step, next), next);
            c.result = rewrite(c.result, next);
            IdedExpr { id, expr: Expr::Comprehension(c) }
        }
        Expr::List(mut l) => {
            l.elements = l.elements.into_iter().map(|a| rewrite(a, next)).collect();
            IdedExpr { id, expr: Expr::List(l) }
        }
        Expr::Map(mut m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(me) = &mut entry.expr {
                    me.key = rewrite(std::mem::take(&mut me.key), next);
                    me.value = rewrite(std::mem::take(&mut me.value), next);
                }
            }
            IdedExpr { id, expr: Expr::Map(m) }
        }
        Expr::Struct(mut s) => {
            for entry in &mut s.entries {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    f.value = rewrite(std::mem::take(&mut f.value), next);
                }
            }
            IdedExpr { id, expr: Expr::Struct(s) }
        }
        Expr::Select(mut s) => {
            let namespace =
                matches!(&s.operand.expr, Expr::Ident(name) if crate::check::BUILTIN_IDENTS.contains(&name.as_str()));
            s.operand = Box::new(rewrite(*s.operand, next));
            let select = IdedExpr { id, expr: Expr::Select(s) };
            // A field selection costs one unit, as in cel-go; a namespace's is a name, not a call.
            if namespace {
                select
            } else {
                wrap(STEP, select, next)
            }
        }
        other => IdedExpr { id, expr: other },
    }
}
