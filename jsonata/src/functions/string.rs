//! String functions.

use super::{Args, arg, arg_num, arg_str, char_index, to_js_string};
use crate::error::{Error, Result};
use crate::eval::Ctx;
use crate::value::{Func, Map, Val, stringify};
use std::rc::Rc;

type R = Result<Option<Val>>;

pub(super) fn string(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(v) = arg(&args, 0) else {
        return Ok(None);
    };
    let pretty = matches!(arg(&args, 1), Some(Val::Bool(true)));
    let s = match v {
        Val::Str(_) | Val::Func(_) => to_js_string(v, ctx.budget.max_bytes)?,
        Val::Num(n) if !n.is_finite() => {
            return Err(Error::new(
                "D3001",
                "Attempting to invoke string function on Infinity or NaN",
            ));
        }
        other => {
            let mut out = String::new();
            let other = match other {
                Val::Arr(items, f) if f.has(crate::value::Flags::OUTER) => {
                    items.first().cloned().unwrap_or(Val::Null)
                }
                o => o.clone(),
            };
            stringify(&other, pretty, &mut out, 0, 0, ctx.budget.max_bytes)?;
            out
        }
    };
    ctx.budget.check_len(s.len())?;
    Ok(Some(Val::string(s)))
}

pub(super) fn length(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(arg_str(&args, 0).map(|s| Val::Num(s.chars().count() as f64)))
}

pub(super) fn substring(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let chars: Vec<char> = s.chars().collect();
    let len = chars.len() as f64;
    let mut start = arg_num(&args, 1).unwrap_or(0.0).trunc();
    if start < 0.0 {
        start = (len + start).max(0.0);
    }
    let start = start.min(len) as usize;
    let end = match arg_num(&args, 2) {
        None => chars.len(),
        Some(l) => {
            if l <= 0.0 {
                return Ok(Some(Val::str("")));
            }
            ((start as f64) + l.trunc()).min(len).max(start as f64) as usize
        }
    };
    let out: String = chars
        .get(start..end)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    Ok(Some(Val::string(out)))
}

pub(super) fn substring_before(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let Some(c) = arg_str(&args, 1) else {
        return Ok(Some(Val::Str(s)));
    };
    Ok(Some(match s.find(&*c) {
        Some(i) => Val::str(s.get(..i).unwrap_or("")),
        None => Val::Str(s.clone()),
    }))
}

pub(super) fn substring_after(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let Some(c) = arg_str(&args, 1) else {
        return Ok(Some(Val::Str(s)));
    };
    Ok(Some(match s.find(&*c) {
        Some(i) => Val::str(s.get(i + c.len()..).unwrap_or("")),
        None => Val::Str(s.clone()),
    }))
}

pub(super) fn uppercase(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(arg_str(&args, 0).map(|s| Val::string(s.to_uppercase())))
}

pub(super) fn lowercase(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(arg_str(&args, 0).map(|s| Val::string(s.to_lowercase())))
}

pub(super) fn trim(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let mut out = String::with_capacity(s.len());
    let mut in_ws = false;
    for c in s.chars() {
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            if !in_ws {
                out.push(' ');
            }
            in_ws = true;
        } else {
            out.push(c);
            in_ws = false;
        }
    }
    let t = out.strip_prefix(' ').unwrap_or(&out);
    let t = t.strip_suffix(' ').unwrap_or(t);
    Ok(Some(Val::str(t)))
}

pub(super) fn pad(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let width = arg_num(&args, 1).unwrap_or(0.0);
    let padc = match arg_str(&args, 2) {
        Some(p) if !p.is_empty() => p,
        _ => Rc::from(" "),
    };
    let len = s.chars().count() as f64;
    let pad_len = width.abs().trunc() - len;
    if pad_len <= 0.0 {
        return Ok(Some(Val::Str(s)));
    }
    // refuse before allocating: a huge width must not exhaust memory or time
    let bytes = pad_len * padc.len().max(1) as f64 + s.len() as f64;
    if bytes > ctx.budget.max_bytes as f64 {
        return Err(Error::new(
            "U1002",
            format!(
                "$pad result would exceed the output size limit of {} bytes",
                ctx.budget.max_bytes
            ),
        ));
    }
    let pad_len = pad_len as usize;
    let mut padding = String::with_capacity(pad_len);
    let mut n = 0;
    'outer: loop {
        for c in padc.chars() {
            if n >= pad_len {
                break 'outer;
            }
            padding.push(c);
            n += 1;
        }
        ctx.budget.tick()?;
    }
    Ok(Some(Val::string(if width > 0.0 {
        format!("{s}{padding}")
    } else {
        format!("{padding}{s}")
    })))
}

pub(super) fn contains(ctx: &mut Ctx, args: Args, _: Option<&Val>, env: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    match arg(&args, 1) {
        Some(Val::Str(p)) => Ok(Some(Val::Bool(s.contains(&**p)))),
        Some(f @ Val::Func(_)) => {
            let m = first_match(ctx, f, &s, env)?;
            Ok(Some(Val::Bool(m.is_some())))
        }
        _ => Ok(None),
    }
}

/// One match from a regex or a custom matcher function.
struct Found {
    start: usize, // byte offsets
    end: usize,
    text: String,
    groups: Vec<Val>,
}

fn first_match(ctx: &mut Ctx, f: &Val, s: &str, env: usize) -> Result<Option<Found>> {
    Ok(all_matches(ctx, f, s, env, Some(1))?.into_iter().next())
}

fn all_matches(
    ctx: &mut Ctx,
    f: &Val,
    s: &str,
    env: usize,
    limit: Option<usize>,
) -> Result<Vec<Found>> {
    let mut out = Vec::new();
    if let Val::Func(func) = f
        && let Func::Regex(re) = &**func
    {
        for caps in re.re.captures_iter(s) {
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
            ctx.budget.tick()?;
            let Some(m) = caps.get(0) else { continue };
            let groups = caps
                .iter()
                .skip(1)
                .map(|g| {
                    g.map(|g| Val::str(g.as_str()))
                        .unwrap_or_else(|| Val::str(""))
                })
                .collect();
            out.push(Found {
                start: m.start(),
                end: m.end(),
                text: m.as_str().to_string(),
                groups,
            });
        }
        return Ok(out);
    }
    // a custom matcher: a function returning {match, start, end, groups, next}
    let mut result = ctx.apply(Some(f.clone()), vec![Some(Val::str(s))], None, env)?;
    let bad = |r: &Option<Val>| match r {
        None => false,
        Some(Val::Obj(m)) => {
            !(m.contains_key("match") && m.contains_key("start") && m.contains_key("end"))
        }
        Some(_) => true,
    };
    if bad(&result) {
        return Err(Error::new(
            "T1010",
            "The matcher function argument passed to function does not return the correct object structure",
        ));
    }
    while let Some(Val::Obj(m)) = &result {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        ctx.budget.tick()?;
        let start_c = m.get("start").and_then(|v| v.as_num()).unwrap_or(0.0) as usize;
        let end_c = m.get("end").and_then(|v| v.as_num()).unwrap_or(0.0) as usize;
        let start = byte_index(s, start_c);
        let end = byte_index(s, end_c);
        out.push(Found {
            start,
            end,
            text: m
                .get("match")
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string(),
            groups: m
                .get("groups")
                .map(|g| g.members().to_vec())
                .unwrap_or_default(),
        });
        let next = m.get("next").cloned();
        result = match next {
            Some(n @ Val::Func(_)) => ctx.apply(Some(n), vec![], None, env)?,
            _ => None,
        };
    }
    Ok(out)
}

fn byte_index(s: &str, chars: usize) -> usize {
    s.char_indices()
        .nth(chars)
        .map(|(i, _)| i)
        .unwrap_or(s.len())
}

pub(super) fn split(ctx: &mut Ctx, args: Args, _: Option<&Val>, env: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let limit = match arg_num(&args, 2) {
        Some(l) if l < 0.0 => {
            return Err(Error::new(
                "D3020",
                "Third argument of split function must evaluate to a positive number",
            ));
        }
        Some(l) => Some(l.floor() as usize),
        None => None,
    };
    let mut parts: Vec<Val> = Vec::new();
    match arg(&args, 1) {
        Some(Val::Str(sep)) => {
            // count first: the element budget must refuse before allocating
            let limit_n = limit.unwrap_or(usize::MAX);
            if sep.is_empty() {
                ctx.budget.alloc(s.chars().count().min(limit_n))?;
                parts = s
                    .chars()
                    .take(limit_n)
                    .map(|c| Val::string(c.to_string()))
                    .collect();
            } else {
                ctx.budget
                    .alloc(s.matches(&**sep).count().saturating_add(1).min(limit_n))?;
                parts = s.split(&**sep).take(limit_n).map(Val::str).collect();
            }
        }
        Some(f @ Val::Func(_)) => {
            let ms = all_matches(ctx, f, &s, env, None)?;
            ctx.budget.alloc(ms.len() + 1)?;
            let mut pos = 0;
            for m in ms {
                parts.push(Val::str(s.get(pos..m.start).unwrap_or("")));
                pos = m.end;
            }
            parts.push(Val::str(s.get(pos..).unwrap_or("")));
        }
        _ => {}
    }
    if let Some(l) = limit {
        parts.truncate(l);
    }
    Ok(Some(Val::array(parts)))
}

pub(super) fn join(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(a) = arg(&args, 0) else {
        return Ok(None);
    };
    let sep = arg_str(&args, 1).unwrap_or_else(|| Rc::from(""));
    let mut out = String::new();
    for (i, x) in a.members().iter().enumerate() {
        if i > 0 {
            out.push_str(&sep);
        }
        if let Val::Str(s) = x {
            out.push_str(s);
        }
        if i & 0xff == 0 {
            ctx.budget.check_len(out.len())?;
            ctx.budget.tick()?;
        }
    }
    ctx.budget.check_len(out.len())?;
    Ok(Some(Val::string(out)))
}

pub(super) fn match_(ctx: &mut Ctx, args: Args, _: Option<&Val>, env: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let limit = match arg_num(&args, 2) {
        Some(l) if l < 0.0 => {
            return Err(Error::new(
                "D3040",
                "Third argument of match function must evaluate to a positive number",
            ));
        }
        Some(l) => Some(l.floor() as usize),
        None => None,
    };
    let Some(f) = arg(&args, 1) else {
        return Ok(None);
    };
    let ms = all_matches(ctx, f, &s, env, limit)?;
    let mut out = Vec::new();
    for m in ms {
        let mut o = Map::default();
        o.insert(Rc::from("match"), Val::string(m.text));
        o.insert(Rc::from("index"), Val::Num(char_index(&s, m.start) as f64));
        o.insert(Rc::from("groups"), Val::array(m.groups));
        out.push(Val::object(o));
    }
    Ok(Some(Val::seq(out)))
}

pub(super) fn replace(ctx: &mut Ctx, args: Args, _: Option<&Val>, env: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let limit = match arg_num(&args, 3) {
        Some(l) if l < 0.0 => {
            return Err(Error::new(
                "D3011",
                "Fourth argument of replace function must evaluate to a positive number",
            ));
        }
        Some(l) => Some(l.floor() as usize),
        None => None,
    };
    let Some(pattern) = arg(&args, 1) else {
        return Ok(None);
    };
    let replacement = arg(&args, 2).cloned();
    let mut out = String::new();
    match pattern {
        Val::Str(p) => {
            if p.is_empty() {
                return Err(Error::new(
                    "D3010",
                    "Second argument of replace function cannot be an empty string",
                ));
            }
            let mut pos = 0;
            let mut count = 0;
            while let Some(i) = s.get(pos..).and_then(|rest| rest.find(&**p)) {
                if limit.is_some_and(|l| count >= l) {
                    break;
                }
                let start = pos + i;
                out.push_str(s.get(pos..start).unwrap_or(""));
                let found = Found {
                    start,
                    end: start + p.len(),
                    text: p.to_string(),
                    groups: Vec::new(),
                };
                out.push_str(&replacement_text(ctx, replacement.as_ref(), &found, env)?);
                ctx.budget.check_len(out.len())?;
                pos = start + p.len();
                count += 1;
            }
            out.push_str(s.get(pos..).unwrap_or(""));
        }
        f @ Val::Func(_) => {
            let ms = all_matches(ctx, f, &s, env, limit)?;
            let mut pos = 0;
            for m in ms {
                if m.end == m.start && m.text.is_empty() {
                    return Err(Error::new(
                        "D1004",
                        "Regular expression matches zero length string",
                    ));
                }
                out.push_str(s.get(pos..m.start).unwrap_or(""));
                out.push_str(&replacement_text(ctx, replacement.as_ref(), &m, env)?);
                ctx.budget.check_len(out.len())?;
                pos = m.end;
            }
            out.push_str(s.get(pos..).unwrap_or(""));
        }
        _ => return Ok(None),
    }
    ctx.budget.check_len(out.len())?;
    Ok(Some(Val::string(out)))
}

fn replacement_text(
    ctx: &mut Ctx,
    replacement: Option<&Val>,
    m: &Found,
    env: usize,
) -> Result<String> {
    match replacement {
        Some(Val::Str(r)) => Ok(substitute(r, m)),
        Some(f @ Val::Func(_)) => {
            let mut o = Map::default();
            o.insert(Rc::from("match"), Val::str(&m.text));
            o.insert(Rc::from("index"), Val::Num(m.start as f64));
            o.insert(Rc::from("groups"), Val::array(m.groups.clone()));
            let r = ctx.apply(Some(f.clone()), vec![Some(Val::object(o))], None, env)?;
            match r {
                Some(Val::Str(s)) => Ok(s.to_string()),
                _ => Err(Error::new(
                    "D3012",
                    "Attempted to replace a matched string with a non-string value",
                )),
            }
        }
        _ => Ok(String::new()),
    }
}

/// Expand `$0`, `$1`.. and `$$` in a replacement string.
fn substitute(r: &str, m: &Found) -> String {
    let chars: Vec<char> = r.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c != '$' {
            out.push(c);
            i += 1;
            continue;
        }
        match chars.get(i + 1) {
            Some('$') => {
                out.push('$');
                i += 2;
            }
            Some(d) if d.is_ascii_digit() => {
                // take the longest run of digits that names an existing group
                let mut j = i + 1;
                while chars.get(j).is_some_and(|c| c.is_ascii_digit()) {
                    j += 1;
                }
                let digits: String = chars
                    .get(i + 1..j)
                    .map(|s| s.iter().collect())
                    .unwrap_or_default();
                let mut taken = false;
                for k in (1..=digits.len()).rev() {
                    let n: usize = digits
                        .get(..k)
                        .and_then(|d| d.parse().ok())
                        .unwrap_or(usize::MAX);
                    if n == 0 {
                        out.push_str(&m.text);
                    } else if n <= m.groups.len() {
                        if let Some(Val::Str(g)) = m.groups.get(n - 1) {
                            out.push_str(g);
                        }
                    } else if k > 1 {
                        continue;
                    }
                    i += 1 + k;
                    taken = true;
                    break;
                }
                if !taken {
                    i += 2;
                }
            }
            _ => {
                out.push('$');
                i += 1;
            }
        }
    }
    out
}

pub(super) fn eval(ctx: &mut Ctx, args: Args, input: Option<&Val>, env: usize) -> R {
    let Some(src) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let budget = ctx
        .budget
        .stack_remaining()
        .min(crate::limits::COMPILE_STACK_BYTES);
    let node = crate::parser::Parser::parse_with_stack(&src, budget).map_err(|e| {
        Error::new(
            "D3120",
            format!(
                "Syntax error in expression passed to function eval: {}",
                e.message
            ),
        )
    })?;
    let context = arg(&args, 1).cloned().or_else(|| input.cloned());
    let context = match context {
        Some(Val::Arr(items, f)) if !f.has(crate::value::Flags::SEQ) => {
            Some(Val::Arr(items, f.with(crate::value::Flags::OUTER)))
        }
        other => other,
    };
    let frame = ctx.new_frame(env)?;
    ctx.eval(&node, context.as_ref(), frame).map_err(|e| {
        if e.is_limit() {
            e
        } else {
            Error::new(
                "D3121",
                format!(
                    "Dynamic error evaluating the expression passed to function eval: {}",
                    e.message
                ),
            )
        }
    })
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(super) fn base64encode(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let bytes = s.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = ((b[0] as u32) << 16) | ((b[1] as u32) << 8) | b[2] as u32;
        for k in 0..4 {
            if k <= chunk.len() {
                let idx = ((n >> (18 - 6 * k)) & 63) as usize;
                out.push(B64.get(idx).map(|c| *c as char).unwrap_or('A'));
            } else {
                out.push('=');
            }
        }
    }
    Ok(Some(Val::string(out)))
}

pub(super) fn base64decode(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(s) = arg_str(&args, 0) else {
        return Ok(None);
    };
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut out = Vec::new();
    for c in s.bytes() {
        let v = match B64.iter().position(|x| *x == c) {
            Some(v) => v as u32,
            None => continue,
        };
        bits = (bits << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push(((bits >> nbits) & 0xff) as u8);
        }
    }
    Ok(Some(Val::string(
        String::from_utf8_lossy(&out).into_owned(),
    )))
}

fn encode(s: &str, keep: &str) -> Result<String> {
    let mut out = String::new();
    for c in s.chars() {
        if crate::lexer::is_lone_surrogate(c) {
            return Err(Error::new(
                "D3140",
                format!("Malformed URL passed to encode function: {s:?}"),
            ));
        }
        if c.is_ascii_alphanumeric() || keep.contains(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    Ok(out)
}

pub(super) fn encode_url_component(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    match arg_str(&args, 0) {
        Some(s) => Ok(Some(Val::string(encode(&s, "-_.!~*'()")?))),
        None => Ok(None),
    }
}

pub(super) fn encode_url(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    match arg_str(&args, 0) {
        Some(s) => Ok(Some(Val::string(encode(&s, "-_.!~*'();,/?:@&=+$#")?))),
        None => Ok(None),
    }
}

fn decode(s: &str, reserved: &str) -> Result<String> {
    let bytes = s.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(v) => {
                    if v < 0x80 && reserved.contains(v as char) {
                        out.extend_from_slice(bytes.get(i..i + 3).unwrap_or(&[]));
                    } else {
                        out.push(v);
                    }
                    i += 3;
                }
                None => {
                    return Err(Error::new(
                        "D3140",
                        "Malformed URL passed to decode function",
                    ));
                }
            }
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| Error::new("D3140", "Malformed URL passed to decode function"))
}

pub(super) fn decode_url_component(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    match arg_str(&args, 0) {
        Some(s) => Ok(Some(Val::string(decode(&s, "")?))),
        None => Ok(None),
    }
}

pub(super) fn decode_url(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    match arg_str(&args, 0) {
        Some(s) => Ok(Some(Val::string(decode(&s, ";/?:@&=+$,#")?))),
        None => Ok(None),
    }
}
