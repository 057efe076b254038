//! Date/time functions; the picture-string machinery lives in `crate::datetime`.

use super::{Args, arg_num, arg_str};
use crate::datetime;
use crate::error::Result;
use crate::eval::Ctx;
use crate::value::Val;

type R = Result<Option<Val>>;

pub(super) fn now(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let pic = arg_str(&args, 0);
    let tz = arg_str(&args, 1);
    Ok(Some(Val::string(datetime::format_millis(
        ctx.now_millis,
        pic.as_deref(),
        tz.as_deref(),
    )?)))
}

pub(super) fn millis(ctx: &mut Ctx, _: Args, _: Option<&Val>, _: usize) -> R {
    Ok(Some(Val::Num(ctx.now_millis)))
}

pub(super) fn from_millis(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(ms) = arg_num(&args, 0) else {
        return Ok(None);
    };
    let pic = arg_str(&args, 1);
    let tz = arg_str(&args, 2);
    Ok(Some(Val::string(datetime::format_millis(
        ms,
        pic.as_deref(),
        tz.as_deref(),
    )?)))
}

pub(super) fn to_millis(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let pic = arg_str(&args, 1);
    Ok(datetime::parse_to_millis(&s, pic.as_deref(), ctx.now_millis)?.map(Val::Num))
}
