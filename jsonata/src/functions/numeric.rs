//! Numeric functions and aggregation.

use super::{Args, arg, arg_num, arg_str};
use crate::error::{Error, Result};
use crate::eval::Ctx;
use crate::number_format;
use crate::value::{Val, js_number_string};

type R = Result<Option<Val>>;

pub(super) fn number(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    match arg(&args, 0) {
        None => Ok(None),
        Some(Val::Num(n)) => Ok(Some(Val::Num(*n))),
        Some(Val::Bool(b)) => Ok(Some(Val::Num(if *b { 1.0 } else { 0.0 }))),
        Some(Val::Str(s)) => {
            match parse_js_number(s) {
                Some(n) if n.is_finite() => Ok(Some(Val::Num(n))),
                _ => Err(Error::new("D3030", "Unable to cast value to a number")
                    .with_token(s.to_string())),
            }
        }
        Some(_) => Err(Error::new("D3030", "Unable to cast value to a number")),
    }
}

/// The number syntax `$number` accepts: JSON numbers, plus 0x/0o/0b integers.
fn parse_js_number(s: &str) -> Option<f64> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(rest, 16).ok().map(|v| v as f64);
    }
    if let Some(rest) = t.strip_prefix("0o").or_else(|| t.strip_prefix("0O")) {
        return u64::from_str_radix(rest, 8).ok().map(|v| v as f64);
    }
    if let Some(rest) = t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
        return u64::from_str_radix(rest, 2).ok().map(|v| v as f64);
    }
    let b = t.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'-') {
        i += 1;
    }
    let int_start = i;
    while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
        i += 1;
    }
    if i == int_start {
        return None;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        let fs = i;
        while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if i == fs {
            return None;
        }
    }
    if matches!(b.get(i), Some(b'e') | Some(b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+') | Some(b'-')) {
            i += 1;
        }
        let es = i;
        while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if i == es {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    t.parse().ok()
}

pub(super) fn abs(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(arg_num(&args, 0).map(|n| Val::Num(n.abs())))
}

pub(super) fn floor(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(arg_num(&args, 0).map(|n| Val::Num(n.floor() + 0.0)))
}

pub(super) fn ceil(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(arg_num(&args, 0).map(|n| Val::Num(n.ceil() + 0.0)))
}

/// Round half to even at a decimal precision, shifting via the decimal
/// exponent (as strings) so that 2.675 style representation errors don't leak.
pub(crate) fn round_half_even(n: f64, precision: i32) -> f64 {
    let shift = |x: f64, p: i32| -> f64 {
        let s = js_number_string(x);
        let (m, e) = match s.split_once('e') {
            Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
            None => (s, 0),
        };
        format!("{m}e{}", e.saturating_add(p)).parse().unwrap_or(x)
    };
    let v = if precision != 0 {
        shift(n, precision)
    } else {
        n
    };
    let mut r = (v + 0.5).floor();
    let diff = r - v;
    if diff.abs() == 0.5 && (r % 2.0).abs() == 1.0 {
        r -= 1.0;
    }
    // (v+0.5).floor() differs from Math.round only in exactness near .5; fine
    let mut result = if precision != 0 {
        shift(r, -precision)
    } else {
        r
    };
    if result == 0.0 {
        result = 0.0;
    }
    result
}

pub(super) fn round(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(n) = arg_num(&args, 0) else {
        return Ok(None);
    };
    // precision beyond ±400 digits is meaningless for doubles; clamping keeps the exponent maths in range
    let p = arg_num(&args, 1).unwrap_or(0.0).clamp(-400.0, 400.0) as i32;
    Ok(Some(Val::Num(round_half_even(n, p))))
}

pub(super) fn power(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let (Some(b), Some(e)) = (arg_num(&args, 0), arg_num(&args, 1)) else {
        return Ok(None);
    };
    let r = b.powf(e);
    if !r.is_finite() {
        return Err(Error::new(
            "D3061",
            format!(
                "The power function has resulted in a value that cannot be represented as a JSON number: base={b}, exponent={e}"
            ),
        ));
    }
    Ok(Some(Val::Num(r)))
}

pub(super) fn sqrt(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(n) = arg_num(&args, 0) else {
        return Ok(None);
    };
    if n < 0.0 {
        return Err(Error::new(
            "D3060",
            format!("The sqrt function cannot be applied to a negative number: {n}"),
        ));
    }
    Ok(Some(Val::Num(n.sqrt())))
}

/// A pseudo random number in [0, 1) seeded from the OS-randomised hasher.
pub(crate) fn random_f64() -> f64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0x9E37_79B9_7F4A_7C15);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

pub(super) fn random(_: &mut Ctx, _: Args, _: Option<&Val>, _: usize) -> R {
    Ok(Some(Val::Num(random_f64())))
}

fn numbers(args: &Args) -> Option<Vec<f64>> {
    arg(args, 0).map(|a| a.members().iter().filter_map(|v| v.as_num()).collect())
}

pub(super) fn sum(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(numbers(&args).map(|v| Val::Num(v.iter().sum())))
}

pub(super) fn max(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(numbers(&args)
        .and_then(|v| v.into_iter().reduce(f64::max))
        .map(Val::Num))
}

pub(super) fn min(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(numbers(&args)
        .and_then(|v| v.into_iter().reduce(f64::min))
        .map(Val::Num))
}

pub(super) fn average(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(numbers(&args).and_then(|v| {
        if v.is_empty() {
            None
        } else {
            Some(Val::Num(v.iter().sum::<f64>() / v.len() as f64))
        }
    }))
}

pub(super) fn format_number(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(n) = arg_num(&args, 0) else {
        return Ok(None);
    };
    let picture = arg_str(&args, 1).unwrap_or_default();
    let options = match arg(&args, 2) {
        Some(Val::Obj(m)) => Some(m.clone()),
        _ => None,
    };
    Ok(Some(Val::string(number_format::format_number(
        n,
        &picture,
        options.as_ref().map(|o| &o.0),
    )?)))
}

pub(super) fn format_base(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(n) = arg_num(&args, 0) else {
        return Ok(None);
    };
    let radix = arg_num(&args, 1).unwrap_or(10.0);
    if !(2.0..=36.0).contains(&radix) {
        return Err(Error::new(
            "D3100",
            format!(
                "The radix of the formatBase function must be between 2 and 36.  It was given {radix}"
            ),
        ));
    }
    let n = round_half_even(n, 0);
    Ok(Some(Val::string(number_format::to_radix(n, radix as u32))))
}

pub(super) fn format_integer(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(n) = arg_num(&args, 0) else {
        return Ok(None);
    };
    let picture = arg_str(&args, 1).unwrap_or_default();
    Ok(Some(Val::string(number_format::format_integer(
        n, &picture,
    )?)))
}

pub(super) fn parse_integer(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let picture = arg_str(&args, 1).unwrap_or_default();
    Ok(number_format::parse_integer(&s, &picture)?.map(Val::Num))
}
