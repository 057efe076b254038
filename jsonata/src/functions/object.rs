//! Object functions, `$type`, `$error` and `$assert`.

use super::{Args, arg, arg_str};
use crate::error::{Error, Result};
use crate::eval::{Ctx, lookup_field};
use crate::value::{Map, Val};
use std::rc::Rc;

type R = Result<Option<Val>>;

pub(super) fn keys(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(v) = arg(&args, 0) else {
        return Ok(None);
    };
    let mut seen: indexmap::IndexSet<Rc<str>> = indexmap::IndexSet::new();
    for x in v.members() {
        if let Val::Obj(m) = x {
            for k in m.keys() {
                seen.insert(k.clone());
            }
        }
    }
    if seen.is_empty() {
        return Ok(None);
    }
    Ok(Some(Val::seq(seen.into_iter().map(Val::Str).collect())))
}

pub(super) fn lookup_fn(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(k) = arg_str(&args, 1) else {
        return Ok(None);
    };
    lookup_field(arg(&args, 0), &k, 0)
}

pub(super) fn spread(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(v) = arg(&args, 0) else {
        return Ok(None);
    };
    match v {
        Val::Arr(items, _) => {
            let mut out = Vec::new();
            for x in items.iter() {
                match x {
                    Val::Obj(m) => {
                        for (k, y) in m.iter() {
                            let mut o = Map::default();
                            o.insert(k.clone(), y.clone());
                            out.push(Val::object(o));
                        }
                    }
                    other => out.push(other.clone()),
                }
            }
            Ok(Some(Val::seq(out)))
        }
        Val::Obj(m) => {
            let mut out = Vec::new();
            for (k, y) in m.iter() {
                let mut o = Map::default();
                o.insert(k.clone(), y.clone());
                out.push(Val::object(o));
            }
            Ok(Some(Val::seq(out)))
        }
        other => Ok(Some(other.clone())),
    }
}

pub(super) fn merge(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(v) = arg(&args, 0) else {
        return Ok(None);
    };
    let mut out = Map::default();
    for x in v.members() {
        if let Val::Obj(m) = x {
            for (k, y) in m.iter() {
                out.insert(k.clone(), y.clone());
            }
        }
    }
    Ok(Some(Val::object(out)))
}

pub(super) fn error(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let msg = arg_str(&args, 0)
        .map(|s| s.to_string())
        .unwrap_or_else(|| "$error() function evaluated".into());
    Err(Error::new("D3137", msg))
}

pub(super) fn assert(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    match arg(&args, 0) {
        Some(Val::Bool(true)) => Ok(None),
        Some(Val::Bool(false)) => {
            let msg = arg_str(&args, 1)
                .map(|s| s.to_string())
                .unwrap_or_else(|| "$assert() statement failed".into());
            Err(Error::new("D3141", msg))
        }
        _ => Err(Error::new(
            "T0410",
            "Argument 1 of function assert does not match function signature",
        )),
    }
}

pub(super) fn type_of(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(arg(&args, 0).map(|v| Val::str(v.type_name())))
}
