//! Binary operators.

use super::{Ctx, R};
use crate::ast::{BinOp, Node};
use crate::error::Error;
use crate::functions::{boolean_of, to_js_string};
use crate::limits::MAX_ARRAY_LEN;
use crate::value::{Val, deep_equal};

impl Ctx {
    pub(super) fn binary(
        &mut self,
        op: BinOp,
        l: &Node,
        r: &Node,
        pos: usize,
        input: Option<&Val>,
        env: usize,
    ) -> R {
        if matches!(op, BinOp::And | BinOp::Or | BinOp::Coalesce | BinOp::Elvis) {
            return self.binary_lazy(op, l, r, input, env);
        }
        let lv = self.eval(l, input, env)?;
        let rv = self.eval(r, input, env)?;
        self.binary_values(op, lv, rv, pos)
    }

    #[inline(never)]
    fn binary_lazy(&mut self, op: BinOp, l: &Node, r: &Node, input: Option<&Val>, env: usize) -> R {
        match op {
            BinOp::And => {
                let lv = self.eval(l, input, env)?;
                if !boolean_of(lv.as_ref()) {
                    return Ok(Some(Val::Bool(false)));
                }
                let rv = self.eval(r, input, env)?;
                Ok(Some(Val::Bool(boolean_of(rv.as_ref()))))
            }
            BinOp::Or => {
                let lv = self.eval(l, input, env)?;
                if boolean_of(lv.as_ref()) {
                    return Ok(Some(Val::Bool(true)));
                }
                let rv = self.eval(r, input, env)?;
                Ok(Some(Val::Bool(boolean_of(rv.as_ref()))))
            }
            BinOp::Coalesce => {
                let lv = self.eval(l, input, env)?;
                match lv {
                    Some(v) => Ok(Some(v)),
                    None => self.eval(r, input, env),
                }
            }
            BinOp::Elvis => {
                let lv = self.eval(l, input, env)?;
                if boolean_of(lv.as_ref()) {
                    return Ok(lv);
                }
                self.eval(r, input, env)
            }
            _ => Ok(None),
        }
    }

    #[inline(never)]
    fn binary_values(&mut self, op: BinOp, lv: Option<Val>, rv: Option<Val>, pos: usize) -> R {
        let sym = op.symbol();
        match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => {
                if let Some(v) = &lv
                    && !matches!(v, Val::Num(_))
                {
                    return Err(Error::at(
                        "T2001",
                        pos,
                        format!("The left side of the {sym} operator must evaluate to a number"),
                    )
                    .with_token(sym));
                }
                if let Some(v) = &rv
                    && !matches!(v, Val::Num(_))
                {
                    return Err(Error::at(
                        "T2002",
                        pos,
                        format!("The right side of the {sym} operator must evaluate to a number"),
                    )
                    .with_token(sym));
                }
                let (Some(Val::Num(a)), Some(Val::Num(b))) = (lv, rv) else {
                    return Ok(None);
                };
                let v = match op {
                    BinOp::Add => a + b,
                    BinOp::Sub => a - b,
                    BinOp::Mul => a * b,
                    BinOp::Div => a / b,
                    _ => a % b,
                };
                // division by zero yields ±Infinity (reported when stringified);
                // overflow of the other operators is an error here
                if !v.is_finite() && op != BinOp::Div {
                    return Err(Error::at("D1001", pos, "Number out of range").with_token(sym));
                }
                Ok(Some(Val::Num(v)))
            }
            BinOp::Eq | BinOp::Ne => {
                let (Some(a), Some(b)) = (lv, rv) else {
                    return Ok(Some(Val::Bool(false)));
                };
                let eq = deep_equal(&a, &b)?;
                Ok(Some(Val::Bool(if op == BinOp::Eq { eq } else { !eq })))
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let comparable =
                    |v: &Option<Val>| matches!(v, None | Some(Val::Num(_)) | Some(Val::Str(_)));
                if !comparable(&lv) || !comparable(&rv) {
                    return Err(Error::at(
                        "T2010",
                        pos,
                        format!("The expressions either side of operator {sym} must evaluate to numeric or string values"),
                    )
                    .with_token(sym));
                }
                let ord = match (&lv, &rv) {
                    (None, _) | (_, None) => return Ok(None),
                    (Some(Val::Num(a)), Some(Val::Num(b))) => a.partial_cmp(b),
                    (Some(Val::Str(a)), Some(Val::Str(b))) => Some(a.cmp(b)),
                    _ => {
                        return Err(Error::at(
                            "T2009",
                            pos,
                            format!("The values either side of operator {sym} must be of the same data type"),
                        )
                        .with_token(sym));
                    }
                };
                let Some(ord) = ord else {
                    return Ok(Some(Val::Bool(false)));
                };
                use std::cmp::Ordering::*;
                let b = match op {
                    BinOp::Lt => ord == Less,
                    BinOp::Le => ord != Greater,
                    BinOp::Gt => ord == Greater,
                    _ => ord != Less,
                };
                Ok(Some(Val::Bool(b)))
            }
            BinOp::Concat => {
                let mut s = match &lv {
                    None => String::new(),
                    Some(v) => to_js_string(v, self.budget.max_bytes)?,
                };
                if let Some(v) = &rv {
                    s.push_str(&to_js_string(v, self.budget.max_bytes)?);
                }
                self.budget.check_len(s.len())?;
                Ok(Some(Val::string(s)))
            }
            BinOp::In => {
                let (Some(a), Some(b)) = (lv, rv) else {
                    return Ok(Some(Val::Bool(false)));
                };
                for x in b.members() {
                    if deep_equal(x, &a)? {
                        return Ok(Some(Val::Bool(true)));
                    }
                }
                Ok(Some(Val::Bool(false)))
            }
            BinOp::Range => {
                if let Some(v) = &lv
                    && !matches!(v, Val::Num(n) if n.fract() == 0.0)
                {
                    return Err(Error::at(
                        "T2003",
                        pos,
                        "The left side of the range operator (..) must evaluate to an integer",
                    )
                    .with_token(".."));
                }
                if let Some(v) = &rv
                    && !matches!(v, Val::Num(n) if n.fract() == 0.0)
                {
                    return Err(Error::at(
                        "T2004",
                        pos,
                        "The right side of the range operator (..) must evaluate to an integer",
                    )
                    .with_token(".."));
                }
                let (Some(Val::Num(a)), Some(Val::Num(b))) = (lv, rv) else {
                    return Ok(None);
                };
                if a > b {
                    return Ok(None);
                }
                let size = b - a + 1.0;
                if size > MAX_ARRAY_LEN as f64 {
                    return Err(Error::at(
                        "D2014",
                        pos,
                        format!("The size of the sequence allocated by the range operator (..) must not exceed 1e7.  Attempted to allocate {size}."),
                    )
                    .with_token(".."));
                }
                let n = size as usize;
                self.budget.alloc(n)?;
                let mut out = Vec::with_capacity(n);
                for i in 0..n {
                    if i & 0xffff == 0 {
                        self.budget.check_time()?;
                    }
                    out.push(Val::Num(a + i as f64));
                }
                Ok(Some(Val::seq(out)))
            }
            _ => Ok(None),
        }
    }
}
