//! Array functions.

use super::{Args, arg, numeric::random_f64};
use crate::error::{Error, Result};
use crate::eval::{Ctx, append};
use crate::value::{Val, deep_equal};

type R = Result<Option<Val>>;

pub(super) fn count(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    Ok(Some(Val::Num(match arg(&args, 0) {
        None => 0.0,
        Some(a) => a.members().len() as f64,
    })))
}

pub(super) fn append_fn(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let mut it = args.into_iter();
    let a = it.next().flatten();
    let b = it.next().flatten();
    let n = a.as_ref().map(|v| v.members().len()).unwrap_or(0)
        + b.as_ref().map(|v| v.members().len()).unwrap_or(0);
    ctx.budget.alloc(n)?;
    if n > crate::limits::MAX_ARRAY_LEN {
        return Err(Error::new("U1002", "Array size limit exceeded"));
    }
    Ok(append(a, b))
}

pub(super) fn sort(ctx: &mut Ctx, args: Args, input: Option<&Val>, env: usize) -> R {
    let Some(a) = arg(&args, 0) else {
        return Ok(None);
    };
    ctx.budget.alloc(a.members().len())?;
    let items: Vec<Val> = a.members().to_vec();
    if items.len() <= 1 {
        return Ok(Some(Val::array(items)));
    }
    let sorted = match arg(&args, 1) {
        None => {
            let numbers = items.iter().all(|v| matches!(v, Val::Num(_)));
            if numbers || items.iter().all(|v| matches!(v, Val::Str(_))) {
                let order = crate::eval::sort_indices(items.len(), &mut ctx.budget, |a, b| {
                    let (Some(x), Some(y)) = (items.get(a), items.get(b)) else {
                        return std::cmp::Ordering::Equal;
                    };
                    if numbers {
                        x.as_num()
                            .partial_cmp(&y.as_num())
                            .unwrap_or(std::cmp::Ordering::Equal)
                    } else {
                        x.as_str().cmp(&y.as_str())
                    }
                })?;
                order
                    .into_iter()
                    .filter_map(|i| items.get(i).cloned())
                    .collect()
            } else {
                return Err(Error::new(
                    "D3070",
                    "The single argument form of the sort function can only be applied to an array of strings or an array of numbers.  Use the second argument to specify a comparison function",
                ));
            }
        }
        Some(f) => {
            let f = f.clone();
            merge_sort(ctx, items, &mut |ctx, x, y| {
                let r = ctx.apply(
                    Some(f.clone()),
                    vec![Some(x.clone()), Some(y.clone())],
                    input,
                    env,
                )?;
                Ok(super::boolean_of(r.as_ref()))
            })?
        }
    };
    Ok(Some(Val::array(sorted)))
}

type Swap<'a> = dyn FnMut(&mut Ctx, &Val, &Val) -> Result<bool> + 'a;

/// Stable bottom-up merge sort with a fallible "a comes after b" comparator.
pub(crate) fn merge_sort(ctx: &mut Ctx, items: Vec<Val>, after: &mut Swap<'_>) -> Result<Vec<Val>> {
    let mut cur = items;
    let n = cur.len();
    let mut width = 1;
    while width < n {
        let mut next = Vec::with_capacity(n);
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut i, mut j) = (start, mid);
            while i < mid && j < end {
                ctx.budget.tick()?;
                let (Some(a), Some(b)) = (cur.get(i), cur.get(j)) else {
                    break;
                };
                if after(ctx, a, b)? {
                    next.push(b.clone());
                    j += 1;
                } else {
                    next.push(a.clone());
                    i += 1;
                }
            }
            next.extend(cur.get(i..mid).unwrap_or(&[]).iter().cloned());
            next.extend(cur.get(j..end).unwrap_or(&[]).iter().cloned());
            start = end;
        }
        cur = next;
        width *= 2;
    }
    Ok(cur)
}

pub(super) fn reverse(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(a) = arg(&args, 0) else {
        return Ok(None);
    };
    ctx.budget.alloc(a.members().len())?;
    let mut v = a.members().to_vec();
    v.reverse();
    Ok(Some(Val::array(v)))
}

pub(super) fn shuffle(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(a) = arg(&args, 0) else {
        return Ok(None);
    };
    ctx.budget.alloc(a.members().len())?;
    let mut v = a.members().to_vec();
    for i in (1..v.len()).rev() {
        let j = ((random_f64() * (i + 1) as f64) as usize).min(i);
        v.swap(i, j);
    }
    Ok(Some(Val::array(v)))
}

pub(super) fn distinct(ctx: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let Some(a) = arg(&args, 0) else {
        return Ok(None);
    };
    if !a.is_array() || a.members().len() <= 1 {
        return Ok(Some(a.clone()));
    }
    let mut out: Vec<Val> = Vec::new();
    for x in a.members() {
        ctx.budget.tick_n(out.len())?;
        let mut dup = false;
        for y in &out {
            if deep_equal(x, y)? {
                dup = true;
                break;
            }
        }
        if !dup {
            out.push(x.clone());
        }
    }
    Ok(Some(if a.is_seq() {
        Val::seq(out)
    } else {
        Val::array(out)
    }))
}

pub(super) fn zip(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> R {
    let arrays: Vec<&[Val]> = args
        .iter()
        .map(|a| a.as_ref().map(|v| v.members()).unwrap_or(&[]))
        .collect();
    let len = arrays.iter().map(|a| a.len()).min().unwrap_or(0);
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        out.push(Val::array(
            arrays.iter().filter_map(|a| a.get(i).cloned()).collect(),
        ));
    }
    Ok(Some(Val::array(out)))
}
