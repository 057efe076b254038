//! The evaluator: walks the processed tree against an input value. One `Ctx`
//! lives for one evaluation and owns everything created during it (frames,
//! values), so nothing outlives the call.

mod apply;
mod ops;
mod path;

pub(crate) use path::sort_indices;

use crate::ast::{Kind, Node, Stage};
use crate::error::{Error, Result};
use crate::functions;
use crate::limits::{Budget, MAX_DATA_DEPTH, data_too_deep};
use crate::value::{Flags, Func, Val};
use std::rc::Rc;
use std::sync::Arc;

/// A variable scope. Frames live in an arena owned by the evaluation, so
/// closures referring to their defining scope cannot form reference cycles
/// that would leak.
pub(crate) struct Frame {
    parent: Option<usize>,
    vars: Vec<(Arc<str>, Option<Val>)>,
}

/// Cap on scopes created by one evaluation (memory bound for runaway loops).
const MAX_FRAMES: usize = 1_000_000;

pub(crate) struct Ctx {
    pub budget: Budget,
    frames: Vec<Frame>,
    /// `$now()`/`$millis()` are fixed for the whole evaluation.
    pub now_millis: f64,
    /// Count of closures created; if none were created during a call, none
    /// can refer to that call's scopes and they can be released at once.
    funcs_created: u64,
    /// First scope of the innermost running lambda call.
    call_base: usize,
}

pub(crate) type R = Result<Option<Val>>;

impl Ctx {
    pub fn new(budget: Budget, now_millis: f64) -> Ctx {
        Ctx {
            budget,
            frames: {
                let mut frames = Vec::with_capacity(8);
                frames.push(Frame {
                    parent: None,
                    vars: Vec::new(),
                });
                frames
            },
            now_millis,
            funcs_created: 0,
            call_base: 0,
        }
    }

    pub fn note_closure(&mut self) {
        self.funcs_created = self.funcs_created.wrapping_add(1);
    }

    /// Scopes created by a call are freed when it returns, unless its result
    /// holds a closure over one of them. This keeps long loops (e.g. `$map`
    /// callbacks, tail recursion) from accumulating scopes.
    fn release_scopes(&mut self, mark: usize, closures_before: u64, result: &R) {
        let free = match result {
            Err(_) | Ok(None) => true,
            Ok(Some(v)) => self.funcs_created == closures_before || !refers_to_scopes(v, mark, 0),
        };
        if free && mark > 0 {
            self.frames.truncate(mark);
        }
    }

    pub(crate) fn truncate_frames(&mut self, mark: usize) {
        if mark > 0 {
            self.frames.truncate(mark);
        }
    }

    /// Run `body` as a call with its own scopes starting at the next frame.
    pub(crate) fn with_call_scope(
        &mut self,
        parent: usize,
        bind: &mut dyn FnMut(&mut Ctx, usize),
        body: &mut dyn FnMut(&mut Ctx, usize) -> R,
    ) -> R {
        let mark = self.frames.len();
        let before = self.funcs_created;
        let frame = self.new_frame(parent)?;
        let saved = std::mem::replace(&mut self.call_base, mark);
        bind(self, frame);
        let r = body(self, frame);
        self.call_base = saved;
        self.release_scopes(mark, before, &r);
        r
    }

    pub fn new_frame(&mut self, parent: usize) -> Result<usize> {
        if self.frames.len() >= MAX_FRAMES {
            return Err(Error::new(
                "U1001",
                "Too many scopes created during evaluation",
            ));
        }
        self.frames.push(Frame {
            parent: Some(parent),
            vars: Vec::new(),
        });
        Ok(self.frames.len() - 1)
    }

    pub fn bind(&mut self, env: usize, name: Arc<str>, value: Option<Val>) {
        if let Some(f) = self.frames.get_mut(env) {
            // an undefined binding is kept: it shadows outer definitions
            f.vars.retain(|(k, _)| *k != name);
            f.vars.push((name, value));
        }
    }

    pub fn lookup(&self, env: usize, name: &str) -> Option<Val> {
        let mut cur = Some(env);
        while let Some(i) = cur {
            let f = self.frames.get(i)?;
            if let Some((_, v)) = f.vars.iter().rev().find(|(k, _)| &**k == name) {
                return v.clone();
            }
            cur = f.parent;
        }
        None
    }

    /// Like `lookup`, but distinguishes "bound to undefined" (Some(None)) from unbound.
    pub fn lookup_entry(&self, env: usize, name: &str) -> Option<Option<Val>> {
        let mut cur = Some(env);
        while let Some(i) = cur {
            let f = self.frames.get(i)?;
            if let Some((_, v)) = f.vars.iter().rev().find(|(k, _)| &**k == name) {
                return Some(v.clone());
            }
            cur = f.parent;
        }
        None
    }

    pub fn frame_from_tuple(&mut self, env: usize, tuple: &[(Arc<str>, Val)]) -> Result<usize> {
        let f = self.new_frame(env)?;
        if let Some(fr) = self.frames.get_mut(f) {
            fr.vars
                .extend(tuple.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
        }
        Ok(f)
    }

    pub fn eval(&mut self, node: &Node, input: Option<&Val>, env: usize) -> R {
        self.budget.enter()?;
        let r = self.eval_inner(node, input, env);
        self.budget.leave();
        r
    }

    // The dispatcher and the arms are separate non-inlined functions so that
    // each level of recursion only pays for the frame of the arm it runs
    // (debug builds otherwise reserve stack for every arm at once).
    fn eval_inner(&mut self, node: &Node, input: Option<&Val>, env: usize) -> R {
        let result = self.eval_kind(node, input, env)?;
        if node.predicate.is_empty()
            && node.group.is_none()
            && !matches!(result, Some(Val::Arr(..)))
        {
            return Ok(result);
        }
        self.finish_node(node, result, env)
    }

    #[inline(never)]
    fn eval_kind(&mut self, node: &Node, input: Option<&Val>, env: usize) -> R {
        match &node.kind {
            Kind::Path(steps) => self.eval_path(node, steps, input, env),
            Kind::Binary(op, l, r) => self.binary(*op, l, r, node.pos, input, env),
            Kind::Neg(e) => self.eval_neg(node, e, input, env),
            Kind::Name(name) => {
                let r = lookup_field(input, name, 0)?;
                if let Some(Val::Arr(items, _)) = &r {
                    self.budget.alloc(items.len())?;
                }
                Ok(r)
            }
            Kind::Str(s) => Ok(Some(Val::str(s))),
            Kind::Num(n) => Ok(Some(Val::Num(*n))),
            Kind::Bool(b) => Ok(Some(Val::Bool(*b))),
            Kind::Null => Ok(Some(Val::Null)),
            Kind::Wildcard => Ok(Some(wildcard(input)?)),
            Kind::Descendant => descendants(input),
            Kind::Parent(_) => Ok(match &node.label {
                Some(l) => self.lookup(env, l),
                None => None,
            }),
            Kind::Variable(name) => Ok(self.eval_variable(name, input, env)),
            Kind::Regex(re) => Ok(Some(Val::Func(Rc::new(Func::Regex(re.clone()))))),
            Kind::Array(items) => self.eval_array(node, items, input, env),
            Kind::Object(pairs) => Ok(Some(self.group(pairs, input.cloned(), env)?)),
            Kind::Block(items) => self.eval_block(items, input, env),
            Kind::Condition(c, t, e) => self.eval_condition(c, t, e.as_deref(), input, env),
            Kind::Bind(name, rhs) => {
                let v = self.eval(rhs, input, env)?;
                self.bind(env, name.clone(), v.clone());
                Ok(v)
            }
            Kind::Call(p, args) => self.eval_call(p, args, input, env, None, node.pos),
            Kind::Partial(p, args) => self.eval_partial(p, args, input, env, node.pos),
            Kind::Placeholder => Ok(None),
            Kind::Lambda(def) => Ok(Some(self.closure(Func::Lambda {
                def: def.clone(),
                env,
                input: input.cloned(),
            }))),
            Kind::Thunk(call) => Ok(Some(self.closure(Func::Thunk {
                call: call.clone(),
                env,
                input: input.cloned(),
                base: self.call_base,
            }))),
            Kind::Apply(l, r) => self.eval_apply_op(l, r, input, env, node.pos),
            Kind::Transform(def) => Ok(Some(self.closure(Func::Transform {
                def: def.clone(),
                env,
            }))),
            Kind::Sort(_) => self.eval_sort_node(node, input, env),
            Kind::Dot(..)
            | Kind::Pred(..)
            | Kind::GroupBy(..)
            | Kind::SortRaw(..)
            | Kind::FocusBind(..)
            | Kind::IndexBind(..) => Err(Error::at("S0201", node.pos, "Syntax error")),
        }
    }

    /// Predicates, grouping and sequence collapsing applied to a node's value.
    #[inline(never)]
    fn finish_node(&mut self, node: &Node, mut result: Option<Val>, env: usize) -> R {
        for stage in &node.predicate {
            if let Stage::Filter(p) = stage {
                result = self.filter(p, result, env)?;
            }
        }
        if !matches!(node.kind, Kind::Path(_))
            && let Some(g) = &node.group
        {
            result = Some(self.group(g, result, env)?);
        }
        if let Some(Val::Arr(items, flags)) = &result
            && flags.has(Flags::SEQ)
        {
            let keep = flags.has(Flags::KEEP) || node.keep_array;
            if items.is_empty() {
                return Ok(None);
            }
            if items.len() == 1 {
                if keep {
                    let items = items.clone();
                    return Ok(Some(Val::Arr(items, flags.with(Flags::KEEP))));
                }
                return Ok(items.first().cloned());
            }
            if node.keep_array {
                let items = items.clone();
                return Ok(Some(Val::Arr(items, flags.with(Flags::KEEP))));
            }
        }
        Ok(result)
    }

    #[inline(never)]
    fn eval_neg(&mut self, node: &Node, e: &Node, input: Option<&Val>, env: usize) -> R {
        match self.eval(e, input, env)? {
            None => Ok(None),
            Some(Val::Num(n)) => Ok(Some(Val::Num(-n))),
            Some(_) => Err(
                Error::at("D1002", node.pos, "Cannot negate a non-numeric value").with_token("-"),
            ),
        }
    }

    fn eval_variable(&self, name: &str, input: Option<&Val>, env: usize) -> Option<Val> {
        if name.is_empty() {
            return match input {
                Some(Val::Arr(items, f)) if f.has(Flags::OUTER) => items.first().cloned(),
                other => other.cloned(),
            };
        }
        match self.lookup_entry(env, name) {
            Some(v) => v,
            None => functions::lookup(name).map(|b| Val::Func(Rc::new(Func::Builtin(b)))),
        }
    }

    #[inline(never)]
    fn eval_array(&mut self, node: &Node, items: &[Node], input: Option<&Val>, env: usize) -> R {
        let mut out: Vec<Val> = Vec::new();
        for item in items {
            let Some(v) = self.eval(item, input, env)? else {
                continue;
            };
            if matches!(item.kind, Kind::Array(_)) {
                out.push(v);
                continue;
            }
            match v {
                Val::Arr(xs, _) => {
                    if out.is_empty() && Rc::strong_count(&xs) == 1 {
                        // sole owner of a fresh array (e.g. a range): take it, don't copy
                        match Rc::try_unwrap(xs) {
                            Ok(mut items) => out = std::mem::take(&mut items.0),
                            Err(xs) => {
                                self.budget.alloc(xs.len())?;
                                out.extend(xs.iter().cloned())
                            }
                        }
                    } else {
                        self.budget.alloc(xs.len())?;
                        out.extend(xs.iter().cloned())
                    }
                }
                other => out.push(other),
            }
        }
        let flags = if node.cons_array {
            Flags::default().with(Flags::CONS)
        } else {
            Flags::default()
        };
        Ok(Some(Val::Arr(Rc::new(crate::value::Items(out)), flags)))
    }

    #[inline(never)]
    fn eval_block(&mut self, items: &[Node], input: Option<&Val>, env: usize) -> R {
        let frame = self.new_frame(env)?;
        let mut last = None;
        for item in items {
            last = self.eval(item, input, frame)?;
        }
        Ok(last)
    }

    #[inline(never)]
    fn eval_condition(
        &mut self,
        c: &Node,
        t: &Node,
        e: Option<&Node>,
        input: Option<&Val>,
        env: usize,
    ) -> R {
        let cv = self.eval(c, input, env)?;
        if functions::boolean_of(cv.as_ref()) {
            self.eval(t, input, env)
        } else if let Some(e) = e {
            self.eval(e, input, env)
        } else {
            Ok(None)
        }
    }

    #[inline(never)]
    fn eval_sort_node(&mut self, node: &Node, input: Option<&Val>, env: usize) -> R {
        let items: Vec<Val> = match input {
            Some(Val::Arr(xs, _)) => xs.iter().cloned().collect(),
            Some(v) => vec![v.clone()],
            None => Vec::new(),
        };
        Ok(Some(self.sort(node, path::SortInput::Items(items), env)?))
    }
}

impl Ctx {
    fn closure(&mut self, f: Func) -> Val {
        self.note_closure();
        Val::Func(Rc::new(f))
    }
}

/// Does `v` hold a closure over a scope at index `mark` or later?
/// Conservative: answers yes when the value is too deep to inspect.
pub(crate) fn refers_to_scopes(v: &Val, mark: usize, depth: usize) -> bool {
    if depth > MAX_DATA_DEPTH {
        return true;
    }
    match v {
        Val::Func(f) => match &**f {
            Func::Lambda { env, input, .. } | Func::PartialLambda { env, input, .. } => {
                *env >= mark
                    || input
                        .as_ref()
                        .is_some_and(|i| refers_to_scopes(i, mark, depth + 1))
            }
            Func::Thunk { .. } => true,
            Func::Transform { env, .. } => *env >= mark,
            Func::Partial { func, args } => {
                refers_to_scopes(func, mark, depth + 1)
                    || args
                        .iter()
                        .flatten()
                        .flatten()
                        .any(|a| refers_to_scopes(a, mark, depth + 1))
            }
            Func::Chain(a, b) => {
                refers_to_scopes(a, mark, depth + 1) || refers_to_scopes(b, mark, depth + 1)
            }
            Func::Builtin(_) | Func::Regex(_) => false,
        },
        Val::Arr(items, _) => items.iter().any(|x| refers_to_scopes(x, mark, depth + 1)),
        Val::Obj(m) => m.values().any(|x| refers_to_scopes(x, mark, depth + 1)),
        Val::Tuples(ts) => ts
            .iter()
            .any(|t| t.iter().any(|(_, x)| refers_to_scopes(x, mark, depth + 1))),
        _ => false,
    }
}

/// Field lookup, mapping over arrays and flattening nested results.
pub(crate) fn lookup_field(input: Option<&Val>, name: &str, depth: usize) -> R {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    match input {
        Some(Val::Arr(items, _)) => {
            let mut out = Vec::new();
            for item in items.iter() {
                match lookup_field(Some(item), name, depth + 1)? {
                    Some(Val::Arr(xs, _)) => out.extend(xs.iter().cloned()),
                    Some(v) => out.push(v),
                    None => {}
                }
            }
            Ok(Some(Val::seq(out)))
        }
        Some(Val::Obj(m)) => Ok(m.get(name).cloned()),
        _ => Ok(None),
    }
}

fn wildcard(input: Option<&Val>) -> Result<Val> {
    let mut input = input;
    if let Some(Val::Arr(items, f)) = input
        && f.has(Flags::OUTER)
        && let Some(first) = items.first()
    {
        input = Some(first);
    }
    let mut out = Vec::new();
    if let Some(Val::Arr(items, _)) = input {
        for v in items.iter() {
            match v {
                Val::Arr(..) => flatten_into(v, &mut out, 0)?,
                other => out.push(other.clone()),
            }
        }
    }
    if let Some(Val::Obj(m)) = input {
        for v in m.values() {
            match v {
                Val::Arr(..) => flatten_into(v, &mut out, 0)?,
                other => out.push(other.clone()),
            }
        }
    }
    Ok(Val::seq(out))
}

pub(crate) fn flatten_into(v: &Val, out: &mut Vec<Val>, depth: usize) -> Result<()> {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    match v {
        Val::Arr(items, _) => {
            for x in items.iter() {
                flatten_into(x, out, depth + 1)?;
            }
        }
        other => out.push(other.clone()),
    }
    Ok(())
}

fn descendants(input: Option<&Val>) -> R {
    let Some(input) = input else {
        return Ok(None);
    };
    let mut out = Vec::new();
    recurse_descendants(input, &mut out, 0)?;
    if out.len() == 1 {
        return Ok(out.pop());
    }
    Ok(Some(Val::seq(out)))
}

fn recurse_descendants(v: &Val, out: &mut Vec<Val>, depth: usize) -> Result<()> {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    if !v.is_array() {
        out.push(v.clone());
    }
    match v {
        Val::Arr(items, _) => {
            for x in items.iter() {
                recurse_descendants(x, out, depth + 1)?;
            }
        }
        Val::Obj(m) => {
            for x in m.values() {
                recurse_descendants(x, out, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `$append` semantics: concatenate, wrapping non-arrays; result is a plain array.
pub(crate) fn append(a: Option<Val>, b: Option<Val>) -> Option<Val> {
    match (a, b) {
        (None, b) => b,
        (a, None) => a,
        (Some(a), Some(b)) => {
            let mut out: Vec<Val> = match &a {
                Val::Arr(xs, _) => xs.iter().cloned().collect(),
                _ => vec![a.clone()],
            };
            match &b {
                Val::Arr(xs, _) => out.extend(xs.iter().cloned()),
                _ => out.push(b.clone()),
            }
            Some(Val::array(out))
        }
    }
}
