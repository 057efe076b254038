//! Higher-order functions: `$map`, `$filter`, `$single`, `$reduce`, `$sift`, `$each`.

use super::{Args, arg, arity, boolean_of, callback_args};
use crate::error::{Error, Result};
use crate::eval::Ctx;
use crate::value::{Map, Val};

type R = Result<Option<Val>>;

fn array_arg(args: &Args) -> Option<Val> {
    arg(args, 0).map(|a| match a {
        Val::Arr(..) => a.clone(),
        other => Val::array(vec![other.clone()]),
    })
}

pub(super) fn map(ctx: &mut Ctx, args: Args, input: Option<&Val>, env: usize) -> R {
    let Some(arr) = array_arg(&args) else {
        return Ok(None);
    };
    let f = arg(&args, 1).cloned();
    let mut out = Vec::new();
    for (i, v) in arr.members().iter().enumerate() {
        let cargs = match &f {
            Some(f) => callback_args(f, v, i, &arr),
            None => vec![],
        };
        if let Some(r) = ctx.apply(f.clone(), cargs, input, env)? {
            ctx.budget.alloc(1)?;
            out.push(r);
        }
    }
    Ok(Some(Val::seq(out)))
}

pub(super) fn filter(ctx: &mut Ctx, args: Args, input: Option<&Val>, env: usize) -> R {
    let Some(arr) = array_arg(&args) else {
        return Ok(None);
    };
    let f = arg(&args, 1).cloned();
    let mut out = Vec::new();
    for (i, v) in arr.members().iter().enumerate() {
        let cargs = match &f {
            Some(f) => callback_args(f, v, i, &arr),
            None => vec![],
        };
        let r = ctx.apply(f.clone(), cargs, input, env)?;
        if boolean_of(r.as_ref()) {
            ctx.budget.alloc(1)?;
            out.push(v.clone());
        }
    }
    Ok(Some(Val::seq(out)))
}

pub(super) fn single(ctx: &mut Ctx, args: Args, input: Option<&Val>, env: usize) -> R {
    let Some(arr) = array_arg(&args) else {
        return Ok(None);
    };
    let f = arg(&args, 1).cloned();
    let mut found: Option<Val> = None;
    for (i, v) in arr.members().iter().enumerate() {
        let keep = match &f {
            Some(f) => {
                let r = ctx.apply(Some(f.clone()), callback_args(f, v, i, &arr), input, env)?;
                boolean_of(r.as_ref())
            }
            None => true,
        };
        if keep {
            if found.is_some() {
                return Err(Error::new(
                    "D3138",
                    "The $single() function expected exactly 1 matching result.  Instead it matched more.",
                ));
            }
            found = Some(v.clone());
        }
    }
    match found {
        Some(v) => Ok(Some(v)),
        None => Err(Error::new(
            "D3139",
            "The $single() function expected exactly 1 matching result.  Instead it matched 0.",
        )),
    }
}

pub(super) fn reduce(ctx: &mut Ctx, args: Args, input: Option<&Val>, env: usize) -> R {
    let Some(arr) = array_arg(&args) else {
        return Ok(None);
    };
    let Some(f) = arg(&args, 1).cloned() else {
        return Ok(None);
    };
    let n = arity(&f);
    if n < 2 {
        return Err(Error::new(
            "D3050",
            "The second argument of reduce function must be a function with at least two arguments",
        ));
    }
    let items = arr.members();
    let (mut acc, start) = match arg(&args, 2) {
        Some(init) => (Some(init.clone()), 0),
        None => (items.first().cloned(), 1),
    };
    for (i, v) in items.iter().enumerate().skip(start) {
        let mut cargs = vec![acc.take(), Some(v.clone())];
        if n >= 3 {
            cargs.push(Some(Val::Num(i as f64)));
        }
        if n >= 4 {
            cargs.push(Some(arr.clone()));
        }
        acc = ctx.apply(Some(f.clone()), cargs, input, env)?;
    }
    Ok(acc)
}

fn obj_callback_args(f: &Val, v: &Val, k: &str, obj: &Val) -> Args {
    let n = arity(f);
    let mut a = vec![Some(v.clone())];
    if n >= 2 {
        a.push(Some(Val::str(k)));
    }
    if n >= 3 {
        a.push(Some(obj.clone()));
    }
    a
}

pub(super) fn sift(ctx: &mut Ctx, args: Args, input: Option<&Val>, env: usize) -> R {
    let Some(obj @ Val::Obj(m)) = arg(&args, 0) else {
        return Ok(None);
    };
    let Some(f) = arg(&args, 1).cloned() else {
        return Ok(None);
    };
    let mut out = Map::default();
    for (k, v) in m.iter() {
        let r = ctx.apply(
            Some(f.clone()),
            obj_callback_args(&f, v, k, obj),
            input,
            env,
        )?;
        if boolean_of(r.as_ref()) {
            out.insert(k.clone(), v.clone());
        }
    }
    if out.is_empty() {
        return Ok(None);
    }
    Ok(Some(Val::object(out)))
}

pub(super) fn each(ctx: &mut Ctx, args: Args, input: Option<&Val>, env: usize) -> R {
    let Some(obj @ Val::Obj(m)) = arg(&args, 0) else {
        return Ok(None);
    };
    let Some(f) = arg(&args, 1).cloned() else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for (k, v) in m.iter() {
        if let Some(r) = ctx.apply(
            Some(f.clone()),
            obj_callback_args(&f, v, k, obj),
            input,
            env,
        )? {
            out.push(r);
        }
    }
    Ok(Some(Val::seq(out)))
}
