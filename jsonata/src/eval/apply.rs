//! Function calls: lambdas, built-ins, partial application, the `~>` operator,
//! regex matchers, the transform operator, and the tail-call trampoline.

use super::{Ctx, R, refers_to_scopes};
use crate::ast::{Kind, LambdaDef, Node, TransformDef};
use crate::error::{Error, Result};
use crate::functions;
use crate::limits::{MAX_DATA_DEPTH, data_too_deep};
use crate::value::{Func, Map, Val, deep_clone};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

fn proc_name(p: &Node) -> String {
    match &p.kind {
        Kind::Variable(n) => n.to_string(),
        Kind::Path(steps) => match steps.first().map(|s| &s.kind) {
            Some(Kind::Name(n)) => n.to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// Stand-in callee for calls made by built-ins (no source node).
static NO_NAME: Node = Node::empty();

#[cold]
#[inline(never)]
fn decorate(mut e: Error, pos: usize, callee: &Node) -> Error {
    if e.position.is_none() {
        e.position = Some(pos);
    }
    if e.token.is_none() {
        e.token = Some(proc_name(callee));
    }
    e
}

type Updates = HashMap<usize, Vec<(Option<Map>, Vec<Rc<str>>)>>;

impl Ctx {
    pub(super) fn eval_call(
        &mut self,
        p: &Node,
        args: &[Node],
        input: Option<&Val>,
        env: usize,
        applyto: Option<Option<Val>>,
        pos: usize,
    ) -> R {
        let proc = self.eval(p, input, env)?;
        if proc.is_none() {
            self.check_forgotten_dollar(p, env, pos, "T1005")?;
        }
        let mut vals = Vec::with_capacity(args.len() + 1);
        if let Some(a) = applyto {
            vals.push(a);
        }
        for a in args {
            vals.push(self.eval(a, input, env)?);
        }
        match self.apply_named(proc, vals, input, env, p) {
            Ok(v) => Ok(v),
            Err(e) => Err(decorate(e, pos, p)),
        }
    }

    /// `uppercase("x")` instead of `$uppercase("x")`: say so.
    #[cold]
    #[inline(never)]
    fn check_forgotten_dollar(
        &self,
        p: &Node,
        env: usize,
        pos: usize,
        code: &'static str,
    ) -> Result<()> {
        if let Kind::Path(steps) = &p.kind
            && let Some(Kind::Name(n)) = steps.first().map(|s| &s.kind)
            && (self.lookup(env, n).is_some() || functions::lookup(n).is_some())
        {
            let what = if code == "T1005" {
                "invoke"
            } else {
                "partially apply"
            };
            return Err(Error::at(
                code,
                pos,
                format!("Attempted to {what} a non-function. Did you mean ${n}?"),
            )
            .with_token(n.to_string()));
        }
        Ok(())
    }

    pub(super) fn eval_partial(
        &mut self,
        p: &Node,
        args: &[Node],
        input: Option<&Val>,
        env: usize,
        pos: usize,
    ) -> R {
        let mut bound: Vec<Option<Option<Val>>> = Vec::with_capacity(args.len());
        for a in args {
            if matches!(a.kind, Kind::Placeholder) {
                bound.push(None);
            } else {
                bound.push(Some(self.eval(a, input, env)?));
            }
        }
        let proc = self.eval(p, input, env)?;
        if proc.is_none() {
            self.check_forgotten_dollar(p, env, pos, "T1007")?;
        }
        match &proc {
            Some(Val::Func(f)) => match &**f {
                Func::Lambda {
                    def,
                    env: lenv,
                    input: linput,
                } => {
                    let frame = self.new_frame(*lenv)?;
                    let mut unbound = Vec::new();
                    for (i, param) in def.params.iter().enumerate() {
                        match bound.get(i) {
                            Some(None) => unbound.push(param.clone()),
                            Some(Some(v)) => self.bind(frame, param.clone(), v.clone()),
                            None => {}
                        }
                    }
                    self.note_closure();
                    Ok(Some(Val::Func(Rc::new(Func::PartialLambda {
                        def: def.clone(),
                        env: frame,
                        input: linput.clone(),
                        params: unbound,
                    }))))
                }
                _ => Ok(Some(Val::Func(Rc::new(Func::Partial {
                    func: Val::Func(f.clone()),
                    args: bound,
                })))),
            },
            _ => Err(
                Error::at("T1008", pos, "Attempted to partially apply a non-function")
                    .with_token(proc_name(p)),
            ),
        }
    }

    pub(super) fn eval_apply_op(
        &mut self,
        l: &Node,
        r: &Node,
        input: Option<&Val>,
        env: usize,
        pos: usize,
    ) -> R {
        let lhs = self.eval(l, input, env)?;
        if let Kind::Call(p, args) = &r.kind {
            return self.eval_call(p, args, input, env, Some(lhs), r.pos);
        }
        let func = self.eval(r, input, env)?;
        match &func {
            Some(Val::Func(_)) => {}
            _ => {
                return Err(Error::at(
                    "T2006",
                    pos,
                    "The right side of the function application operator ~> must be a function",
                )
                .with_token("~>"));
            }
        }
        if let Some(Val::Func(_)) = &lhs {
            return Ok(Some(Val::Func(Rc::new(Func::Chain(
                lhs.unwrap_or(Val::Null),
                func.unwrap_or(Val::Null),
            )))));
        }
        self.apply(func, vec![lhs], input, env)
    }

    /// Apply a function value to arguments (used by built-ins for callbacks).
    pub fn apply(
        &mut self,
        proc: Option<Val>,
        args: Vec<Option<Val>>,
        input: Option<&Val>,
        env: usize,
    ) -> R {
        self.apply_named(proc, args, input, env, &NO_NAME)
    }

    #[inline(never)]
    fn apply_named(
        &mut self,
        proc: Option<Val>,
        args: Vec<Option<Val>>,
        input: Option<&Val>,
        env: usize,
        callee: &Node,
    ) -> R {
        let mut result = self.apply_inner(proc, args, input, env, callee)?;
        // trampoline: tail calls come back as thunks and are run here, in a loop
        loop {
            let thunk = match &result {
                Some(Val::Func(f)) => match &**f {
                    Func::Thunk {
                        call,
                        env,
                        input,
                        base,
                    } => Some((call.clone(), *env, input.clone(), *base)),
                    _ => None,
                },
                _ => None,
            };
            let Some((call, tenv, tinput, base)) = thunk else {
                break;
            };
            result = None;
            self.budget.tick()?;
            let Kind::Call(p, args) = &call.kind else {
                break;
            };
            let next = self.eval(p, tinput.as_ref(), tenv)?;
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(self.eval(a, tinput.as_ref(), tenv)?);
            }
            // The finished call's scopes are dead now unless what we carry into
            // the next call refers to them. Built-ins may use the caller's
            // scope (`$eval`), so only user functions qualify.
            let user_fn = matches!(&next, Some(Val::Func(f)) if matches!(&**f, Func::Lambda { .. } | Func::PartialLambda { .. }));
            if user_fn
                && base >= 1
                && !next.as_ref().is_some_and(|v| refers_to_scopes(v, base, 0))
                && !vals.iter().flatten().any(|v| refers_to_scopes(v, base, 0))
                && !tinput
                    .as_ref()
                    .is_some_and(|v| refers_to_scopes(v, base, 0))
            {
                self.truncate_frames(base);
            }
            result = match self.apply_inner(next, vals, tinput.as_ref(), tenv, p) {
                Ok(r) => r,
                Err(e) => return Err(decorate(e, call.pos, p)),
            };
        }
        Ok(result)
    }

    fn apply_inner(
        &mut self,
        proc: Option<Val>,
        args: Vec<Option<Val>>,
        input: Option<&Val>,
        env: usize,
        callee: &Node,
    ) -> R {
        let Some(Val::Func(f)) = proc else {
            return Err(Error::new("T1006", "Attempted to invoke a non-function")
                .with_token(proc_name(callee)));
        };
        self.budget.tick()?;
        if let Func::Lambda {
            def,
            env: lenv,
            input: linput,
        } = &*f
        {
            return self.call_lambda(def, *lenv, linput.as_ref(), args, input, callee);
        }
        self.call_func(&f, args, input, env, callee)
    }

    /// The hot path of user function calls, kept small.
    fn call_lambda(
        &mut self,
        def: &Arc<LambdaDef>,
        lenv: usize,
        linput: Option<&Val>,
        args: Vec<Option<Val>>,
        input: Option<&Val>,
        callee: &Node,
    ) -> R {
        let args = match &def.signature {
            Some(sig) => sig.validate(args, input, &proc_name(callee))?,
            None => args,
        };
        let mut args = args.into_iter();
        self.with_call_scope(
            lenv,
            &mut |ctx, frame| {
                for p in def.params.iter() {
                    ctx.bind(frame, p.clone(), args.next().flatten());
                }
            },
            &mut |ctx, frame| ctx.eval(&def.body, linput, frame),
        )
    }

    #[inline(never)]
    fn call_func(
        &mut self,
        f: &Rc<Func>,
        args: Vec<Option<Val>>,
        input: Option<&Val>,
        env: usize,
        callee: &Node,
    ) -> R {
        let name = proc_name(callee);
        let name = name.as_str();
        match &**f {
            Func::Lambda {
                def,
                env: lenv,
                input: linput,
            } => self.call_lambda(def, *lenv, linput.as_ref(), args, input, callee),
            Func::PartialLambda {
                def,
                env: lenv,
                input: linput,
                params,
            } => {
                let mut args = args.into_iter();
                self.with_call_scope(
                    *lenv,
                    &mut |ctx, frame| {
                        for p in params.iter() {
                            ctx.bind(frame, p.clone(), args.next().flatten());
                        }
                    },
                    &mut |ctx, frame| ctx.eval(&def.body, linput.as_ref(), frame),
                )
            }
            Func::Thunk { .. } => Ok(Some(Val::Func(f.clone()))),
            Func::Builtin(b) => {
                let args = match b.signature() {
                    Some(sig) => sig.validate(args, input, b.name)?,
                    None => args,
                };
                (b.func)(self, args, input, env)
            }
            Func::Partial { func, args: bound } => {
                let mut supplied = args.into_iter();
                let mut full = Vec::with_capacity(bound.len());
                for b in bound {
                    match b {
                        Some(v) => full.push(v.clone()),
                        None => full.push(supplied.next().flatten()),
                    }
                }
                // nested partial applications recurse without passing through
                // `eval`: account for depth and stack here
                self.budget.enter()?;
                let r = self.apply_named(Some(func.clone()), full, input, env, callee);
                self.budget.leave();
                r
            }
            Func::Regex(re) => {
                let s = match args.first() {
                    Some(Some(Val::Str(s))) => s.clone(),
                    _ => return Ok(None),
                };
                Ok(functions::regex_match_object(re, &s, 0))
            }
            Func::Chain(a, b) => {
                self.budget.enter()?;
                let r = self
                    .apply(Some(a.clone()), args, input, env)
                    .and_then(|mid| self.apply(Some(b.clone()), vec![mid], input, env));
                self.budget.leave();
                r
            }
            Func::Transform { def, env: tenv } => {
                let arg = args.into_iter().next().flatten();
                match &arg {
                    None => return Ok(None),
                    Some(Val::Obj(_)) | Some(Val::Arr(..)) => {}
                    Some(_) => {
                        return Err(Error::new(
                            "T0410",
                            "Argument 1 of function transform does not match function signature",
                        )
                        .with_token(name));
                    }
                }
                self.transform(def, *tenv, arg)
            }
        }
    }

    fn transform(&mut self, def: &Arc<TransformDef>, env: usize, arg: Option<Val>) -> R {
        let Some(obj) = arg else { return Ok(None) };
        let clone = deep_clone(&obj, 0)?;
        let matches = self.eval(&def.pattern, Some(&clone), env)?;
        let mut updates: Updates = HashMap::new();
        if let Some(m) = &matches {
            for item in m.members() {
                let Val::Obj(rc) = item else { continue };
                let key = Rc::as_ptr(rc) as usize;
                let update = self.eval(&def.update, Some(item), env)?;
                let upd = match update {
                    None => None,
                    Some(Val::Obj(u)) => Some(u.0.clone()),
                    Some(_) => {
                        return Err(Error::at(
                            "T2011",
                            def.update.pos,
                            "The insert/update clause of the transform expression must evaluate to an object",
                        ));
                    }
                };
                let mut dels = Vec::new();
                if let Some(d) = &def.delete {
                    let deletions = self.eval(d, Some(item), env)?;
                    if let Some(dv) = deletions {
                        for x in dv.members() {
                            match x {
                                Val::Str(s) => dels.push(s.clone()),
                                _ => {
                                    return Err(Error::at(
                                        "T2012",
                                        d.pos,
                                        "The delete clause of the transform expression must evaluate to a string or array of strings",
                                    ));
                                }
                            }
                        }
                    }
                }
                updates.entry(key).or_default().push((upd, dels));
            }
        }
        // the matches hold references into the copy: release them first so
        // that the copy can be changed in place
        drop(matches);
        let mut out = clone;
        if !updates.is_empty() {
            apply_updates(&mut out, &updates, 0)?;
        }
        Ok(Some(out))
    }
}

/// Apply the collected updates to the copy, in place. The copy was made by
/// `deep_clone` for this transform, so its containers are normally uniquely
/// owned and are changed without copying; one still shared (held by a
/// variable of the pattern, say) is copied first by `Rc::make_mut`. Updates
/// are keyed by the address the object had when the pattern matched it, so
/// the key is read before any copy.
fn apply_updates(v: &mut Val, updates: &Updates, depth: usize) -> Result<()> {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    match v {
        Val::Obj(rc) => {
            let key = Rc::as_ptr(rc) as usize;
            let m = &mut Rc::make_mut(rc).0;
            for x in m.values_mut() {
                apply_updates(x, updates, depth + 1)?;
            }
            if let Some(ups) = updates.get(&key) {
                for (upd, dels) in ups {
                    if let Some(u) = upd {
                        for (k, x) in u.iter() {
                            m.insert(k.clone(), x.clone());
                        }
                    }
                    for d in dels {
                        m.shift_remove(d);
                    }
                }
            }
        }
        Val::Arr(items, _) => {
            for x in Rc::make_mut(items).0.iter_mut() {
                apply_updates(x, updates, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}
