//! Path evaluation: steps mapped over sequences with JSONata's flattening
//! rules, tuple streams for `@`/`#`/`%`, predicates, sorting and grouping.

use super::{Ctx, R};
use crate::ast::{Kind, Node, SortTerm, Stage};
use crate::error::{Error, Result};
use crate::functions::boolean_of;
use crate::value::{Flags, Items, Map, Tuple, Val};
use std::rc::Rc;
use std::sync::Arc;

/// The input sequence of a path step, shared with the previous step's result
/// rather than copied.
pub(crate) enum Inputs {
    Undefined,
    One(Val),
    Many(Rc<Items>),
}

impl Inputs {
    fn len(&self) -> usize {
        match self {
            Inputs::Undefined | Inputs::One(_) => 1,
            Inputs::Many(items) => items.len(),
        }
    }

    fn get(&self, i: usize) -> Option<&Val> {
        match self {
            Inputs::Undefined => None,
            Inputs::One(v) => Some(v),
            Inputs::Many(items) => items.get(i),
        }
    }

    fn defined(&self) -> Vec<Val> {
        match self {
            Inputs::Undefined => Vec::new(),
            Inputs::One(v) => vec![v.clone()],
            Inputs::Many(items) => items.to_vec(),
        }
    }

    fn to_seq(&self) -> Val {
        Val::seq(self.defined())
    }
}

pub(crate) enum SortInput {
    Items(Vec<Val>),
    Tuples(Vec<Tuple>),
}

fn at_key() -> Arc<str> {
    Arc::from("@")
}

fn tuple_get<'a>(t: &'a Tuple, k: &str) -> Option<&'a Val> {
    t.iter().rev().find(|(n, _)| &**n == k).map(|(_, v)| v)
}

fn tuple_set(t: &mut Tuple, k: Arc<str>, v: Val) {
    if let Some(slot) = t.iter_mut().find(|(n, _)| *n == k) {
        slot.1 = v;
    } else {
        t.push((k, v));
    }
}

impl Ctx {
    pub(super) fn eval_path(
        &mut self,
        node: &Node,
        steps: &[Node],
        input: Option<&Val>,
        env: usize,
    ) -> R {
        let first_is_var = matches!(steps.first().map(|s| &s.kind), Some(Kind::Variable(_)));
        let mut inputs: Inputs = match input {
            Some(Val::Arr(items, _)) if !first_is_var => Inputs::Many(items.clone()),
            Some(v) => Inputs::One(v.clone()),
            None => Inputs::Undefined,
        };
        // `None` stands for the empty sequence until a step produces a result
        // (saves allocating one per path)
        let mut result: Option<Val> = None;
        let mut tuples: Option<Vec<Tuple>> = None;
        let mut tuple_mode = false;
        let last_index = steps.len().saturating_sub(1);
        for (i, step) in steps.iter().enumerate() {
            if step.tuple {
                tuple_mode = true;
            }
            if i == 0 && step.cons_array {
                let seq = inputs.to_seq();
                result = Some(
                    self.eval(step, Some(&seq), env)?
                        .unwrap_or_else(|| Val::seq(Vec::new())),
                );
            } else if tuple_mode {
                tuples = Some(self.tuple_step(step, &inputs, tuples.take(), env)?);
            } else {
                result = Some(self.eval_step(step, &inputs, env, i == last_index)?);
            }
            if !tuple_mode
                && result
                    .as_ref()
                    .is_none_or(|r| r.members().is_empty() && r.is_array())
            {
                break;
            }
            if step.focus.is_none() {
                inputs = match &result {
                    Some(Val::Arr(items, _)) => Inputs::Many(items.clone()),
                    Some(other) => Inputs::One(other.clone()),
                    None => Inputs::Many(Rc::default()),
                };
            }
        }
        let mut result = result.unwrap_or_else(|| Val::seq(Vec::new()));
        if tuple_mode {
            let ts = tuples.unwrap_or_default();
            if let Some(g) = &node.group {
                return Ok(Some(self.group(g, Some(Val::Tuples(Rc::new(ts))), env)?));
            }
            if node.tuple {
                result = Val::Tuples(Rc::new(ts));
            } else {
                let mut out = Vec::with_capacity(ts.len());
                for t in &ts {
                    if let Some(v) = tuple_get(t, "@") {
                        out.push(v.clone());
                    }
                }
                result = Val::seq(out);
            }
        }
        if node.keep_singleton {
            if let Val::Arr(_, f) = &result
                && f.has(Flags::CONS)
                && !f.has(Flags::SEQ)
            {
                result = Val::seq(vec![result.clone()]);
            }
            result = result.with_flag(Flags::KEEP);
        }
        if let Some(g) = &node.group {
            return Ok(Some(self.group(g, Some(result), env)?));
        }
        Ok(Some(result))
    }

    fn eval_step(&mut self, step: &Node, inputs: &Inputs, env: usize, last: bool) -> Result<Val> {
        if let Kind::Sort(_) = step.kind {
            let items = inputs.defined();
            let mut r = Some(self.sort(step, SortInput::Items(items), env)?);
            for stage in &step.stages {
                if let Stage::Filter(p) = stage {
                    r = self.filter(p, r, env)?;
                }
            }
            return Ok(r.unwrap_or_else(|| Val::seq(Vec::new())));
        }
        let mut results: Vec<Val> = Vec::new();
        for i in 0..inputs.len() {
            let item = inputs.get(i);
            let mut res = self.eval(step, item, env)?;
            for stage in &step.stages {
                if let Stage::Filter(p) = stage {
                    res = self.filter(p, res, env)?;
                }
            }
            if let Some(r) = res {
                results.push(r);
            }
        }
        if last
            && results.len() == 1
            && results.first().is_some_and(|r| r.is_array() && !r.is_seq())
        {
            return Ok(results.pop().unwrap_or(Val::Null));
        }
        // nothing to splice (the usual case): the results are the sequence
        if results.iter().all(|r| {
            !matches!(r, Val::Arr(_, f) if !f.has(Flags::CONS)) && !matches!(r, Val::Tuples(_))
        }) {
            return Ok(Val::seq(results));
        }
        let mut out = Vec::new();
        for r in results {
            match &r {
                Val::Arr(items, f) if !f.has(Flags::CONS) => {
                    self.budget.alloc(items.len())?;
                    out.extend(items.iter().cloned())
                }
                Val::Tuples(ts) => {
                    for t in ts.iter() {
                        if let Some(v) = tuple_get(t, "@") {
                            out.push(v.clone());
                        }
                    }
                }
                _ => out.push(r),
            }
        }
        Ok(Val::seq(out))
    }

    fn tuple_step(
        &mut self,
        step: &Node,
        inputs: &Inputs,
        tuples: Option<Vec<Tuple>>,
        env: usize,
    ) -> Result<Vec<Tuple>> {
        if let Kind::Sort(_) = step.kind {
            let sorted = match tuples {
                Some(ts) => self.sort(step, SortInput::Tuples(ts), env)?,
                None => {
                    let items: Vec<Val> = inputs.defined();
                    let sorted = self.sort(step, SortInput::Items(items), env)?;
                    let mut ts = Vec::new();
                    for (i, v) in sorted.members().iter().enumerate() {
                        let mut t: Tuple = vec![(at_key(), v.clone())];
                        if let Some(ix) = &step.index {
                            t.push((ix.clone(), Val::Num(i as f64)));
                        }
                        ts.push(t);
                    }
                    Val::Tuples(Rc::new(ts))
                }
            };
            let mut ts = match sorted {
                Val::Tuples(ts) => Rc::try_unwrap(ts).unwrap_or_else(|rc| (*rc).clone()),
                _ => Vec::new(),
            };
            ts = self.stages(&step.stages, ts, env)?;
            return Ok(ts);
        }
        let tuples = match tuples {
            Some(t) => t,
            None => inputs
                .defined()
                .into_iter()
                .map(|v| vec![(at_key(), v)])
                .collect(),
        };
        let mut out: Vec<Tuple> = Vec::new();
        for t in &tuples {
            let step_env = self.frame_from_tuple(env, t)?;
            let ctx_val = tuple_get(t, "@").cloned();
            let res = self.eval(step, ctx_val.as_ref(), step_env)?;
            let Some(res) = res else { continue };
            match res {
                Val::Tuples(rs) => {
                    for r in rs.iter() {
                        let mut nt = t.clone();
                        for (k, v) in r.iter() {
                            tuple_set(&mut nt, k.clone(), v.clone());
                        }
                        out.push(nt);
                    }
                }
                other => {
                    let items: Vec<Val> = match &other {
                        Val::Arr(xs, _) => xs.iter().cloned().collect(),
                        v => vec![v.clone()],
                    };
                    self.budget.alloc(items.len())?;
                    for (bb, item) in items.into_iter().enumerate() {
                        let mut nt = t.clone();
                        if let Some(f) = &step.focus {
                            tuple_set(&mut nt, f.clone(), item);
                        } else {
                            tuple_set(&mut nt, at_key(), item);
                        }
                        if let Some(ix) = &step.index {
                            tuple_set(&mut nt, ix.clone(), Val::Num(bb as f64));
                        }
                        if let (Some(label), Some(prev)) = (&step.label, tuple_get(t, "@")) {
                            let prev = prev.clone();
                            tuple_set(&mut nt, label.clone(), prev);
                        }
                        out.push(nt);
                    }
                }
            }
        }
        self.stages(&step.stages, out, env)
    }

    fn stages(&mut self, stages: &[Stage], mut ts: Vec<Tuple>, env: usize) -> Result<Vec<Tuple>> {
        for stage in stages {
            match stage {
                Stage::Filter(p) => {
                    ts = match self.filter(p, Some(Val::Tuples(Rc::new(ts))), env)? {
                        Some(Val::Tuples(r)) => {
                            Rc::try_unwrap(r).unwrap_or_else(|rc| (*rc).clone())
                        }
                        _ => Vec::new(),
                    };
                }
                Stage::Index(name) => {
                    for (i, t) in ts.iter_mut().enumerate() {
                        tuple_set(t, name.clone(), Val::Num(i as f64));
                    }
                }
            }
        }
        Ok(ts)
    }

    pub(super) fn filter(&mut self, pred: &Node, input: Option<Val>, env: usize) -> R {
        if let Some(Val::Tuples(ts)) = &input {
            let mut out = Vec::new();
            let len = ts.len();
            if let Kind::Num(n) = pred.kind {
                if let Some(t) = index_of(n, len).and_then(|i| ts.get(i)) {
                    out.push(t.clone());
                }
                return Ok(Some(Val::Tuples(Rc::new(out))));
            }
            for (i, t) in ts.iter().enumerate() {
                let fenv = self.frame_from_tuple(env, t)?;
                let ctx = tuple_get(t, "@").cloned();
                let res = self.eval(pred, ctx.as_ref(), fenv)?;
                if predicate_selects(res.as_ref(), i, len) {
                    out.push(t.clone());
                }
            }
            return Ok(Some(Val::Tuples(Rc::new(out))));
        }
        let items: Vec<Val> = match &input {
            None => return Ok(Some(Val::seq(Vec::new()))),
            Some(Val::Arr(xs, _)) => xs.iter().cloned().collect(),
            Some(v) => vec![v.clone()],
        };
        let len = items.len();
        if let Kind::Num(n) = pred.kind
            && pred.predicate.is_empty()
        {
            let mut out = Vec::new();
            if let Some(item) = index_of(n, len).and_then(|i| items.get(i)) {
                if item.is_array() {
                    return Ok(Some(item.clone()));
                }
                out.push(item.clone());
            }
            return Ok(Some(Val::seq(out)));
        }
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let res = self.eval(pred, Some(item), env)?;
            if predicate_selects(res.as_ref(), i, len) {
                out.push(item.clone());
            }
        }
        Ok(Some(Val::seq(out)))
    }

    pub(crate) fn sort(&mut self, step: &Node, input: SortInput, env: usize) -> Result<Val> {
        let Kind::Sort(terms) = &step.kind else {
            return Ok(Val::seq(Vec::new()));
        };
        let n = match &input {
            SortInput::Items(v) => v.len(),
            SortInput::Tuples(t) => t.len(),
        };
        // evaluate every sort key once per item
        let mut keys: Vec<Vec<Option<Val>>> = Vec::with_capacity(n);
        for i in 0..n {
            let mut row = Vec::with_capacity(terms.len());
            for term in terms {
                let v = match &input {
                    SortInput::Items(items) => {
                        let item = items.get(i).cloned();
                        self.eval(&term.expr, item.as_ref(), env)?
                    }
                    SortInput::Tuples(ts) => match ts.get(i) {
                        Some(t) => {
                            let t = t.clone();
                            let fenv = self.frame_from_tuple(env, &t)?;
                            let ctx = tuple_get(&t, "@").cloned();
                            self.eval(&term.expr, ctx.as_ref(), fenv)?
                        }
                        None => None,
                    },
                };
                row.push(v);
            }
            keys.push(row);
        }
        if n > 1 {
            check_sort_keys(terms, &keys)?;
        }
        let budget = &mut self.budget;
        let order = sort_indices(n, budget, |a, b| {
            let (Some(ka), Some(kb)) = (keys.get(a), keys.get(b)) else {
                return std::cmp::Ordering::Equal;
            };
            for (t, (x, y)) in terms.iter().zip(ka.iter().zip(kb.iter())) {
                let c = compare_keys(x.as_ref(), y.as_ref());
                let c = if t.descending && x.is_some() && y.is_some() {
                    c.reverse()
                } else {
                    c
                };
                if c != std::cmp::Ordering::Equal {
                    return c;
                }
            }
            std::cmp::Ordering::Equal
        })?;
        Ok(match input {
            SortInput::Items(items) => Val::seq(
                order
                    .iter()
                    .filter_map(|&i| items.get(i).cloned())
                    .collect(),
            ),
            SortInput::Tuples(ts) => Val::Tuples(Rc::new(
                order.iter().filter_map(|&i| ts.get(i).cloned()).collect(),
            )),
        })
    }

    pub(crate) fn group(
        &mut self,
        pairs: &[(Node, Node)],
        input: Option<Val>,
        env: usize,
    ) -> Result<Val> {
        // the common case, an object constructor over one value (or none):
        // every key is evaluated once, against that value, so there is no
        // grouping to do
        let single = match &input {
            Some(Val::Tuples(_)) => None,
            Some(Val::Arr(xs, _)) if xs.len() > 1 => None,
            Some(Val::Arr(xs, _)) => Some(xs.first().cloned()),
            None => Some(None),
            Some(v) => Some(Some(v.clone())),
        };
        if let Some(item) = single {
            return self.construct_one(pairs, item.as_ref(), env);
        }
        // members are collected and joined once at the end: appending to an
        // array per item would be quadratic for large groups
        let mut groups: indexmap::IndexMap<Rc<str>, (Vec<Val>, Vec<Tuple>, usize)> =
            indexmap::IndexMap::new();
        match &input {
            Some(Val::Tuples(ts)) => {
                for t in ts.iter() {
                    let fenv = self.frame_from_tuple(env, t)?;
                    let ctx = tuple_get(t, "@").cloned();
                    for (pi, (k, _)) in pairs.iter().enumerate() {
                        let key = self.eval(k, ctx.as_ref(), fenv)?;
                        let Some(key) = group_key(key, k.pos)? else {
                            continue;
                        };
                        match groups.get_mut(&key) {
                            Some(g) => {
                                if g.2 != pi {
                                    return Err(duplicate_key(&key, k.pos));
                                }
                                g.1.push(t.clone());
                            }
                            None => {
                                groups.insert(key, (Vec::new(), vec![t.clone()], pi));
                            }
                        }
                    }
                }
            }
            _ => {
                let items: Vec<Option<Val>> = match &input {
                    Some(Val::Arr(xs, _)) if !xs.is_empty() => {
                        xs.iter().cloned().map(Some).collect()
                    }
                    Some(Val::Arr(..)) | None => vec![None],
                    Some(v) => vec![Some(v.clone())],
                };
                for item in &items {
                    for (pi, (k, _)) in pairs.iter().enumerate() {
                        let key = self.eval(k, item.as_ref(), env)?;
                        let Some(key) = group_key(key, k.pos)? else {
                            continue;
                        };
                        match groups.get_mut(&key) {
                            Some(g) => {
                                if g.2 != pi {
                                    return Err(duplicate_key(&key, k.pos));
                                }
                                g.0.extend(item.iter().cloned());
                            }
                            None => {
                                groups
                                    .insert(key, (item.iter().cloned().collect(), Vec::new(), pi));
                            }
                        }
                    }
                }
            }
        }
        let mut out = Map::default();
        let reduce = matches!(input, Some(Val::Tuples(_)));
        for (key, (data, ts, pi)) in groups {
            let Some((_, vexpr)) = pairs.get(pi) else {
                continue;
            };
            let value = if reduce {
                let mut tuple = reduce_tuples(&ts, &mut self.budget)?;
                let ctx = tuple
                    .iter()
                    .position(|(k, _)| &**k == "@")
                    .map(|i| tuple.remove(i).1);
                let fenv = self.frame_from_tuple(env, &tuple)?;
                self.eval(vexpr, ctx.as_ref(), fenv)?
            } else {
                let data = join_members(data, &mut self.budget)?;
                self.eval(vexpr, data.as_ref(), env)?
            };
            if let Some(v) = value {
                out.insert(key, v);
            }
        }
        Ok(Val::object(out))
    }

    /// An object constructor applied to a single value: the keys first (as
    /// `group` evaluates them, so a duplicate key fails before any value is
    /// evaluated), then the values in key order.
    fn construct_one(
        &mut self,
        pairs: &[(Node, Node)],
        item: Option<&Val>,
        env: usize,
    ) -> Result<Val> {
        let mut keys: Vec<(Rc<str>, usize)> = Vec::with_capacity(pairs.len());
        // a linear search is quicker for the usual handful of keys
        let mut seen: Option<std::collections::HashSet<Rc<str>>> =
            (pairs.len() > 16).then(std::collections::HashSet::new);
        for (pi, (k, _)) in pairs.iter().enumerate() {
            let key = self.eval(k, item, env)?;
            let Some(key) = group_key(key, k.pos)? else {
                continue;
            };
            // one item: a key seen before comes from another pair
            let dup = match &mut seen {
                Some(set) => !set.insert(key.clone()),
                None => keys.iter().any(|(s, _)| *s == key),
            };
            if dup {
                return Err(duplicate_key(&key, k.pos));
            }
            keys.push((key, pi));
        }
        let mut out = Map::with_capacity_and_hasher(keys.len(), Default::default());
        for (key, pi) in keys {
            let Some((_, vexpr)) = pairs.get(pi) else {
                continue;
            };
            if let Some(v) = self.eval(vexpr, item, env)? {
                out.insert(key, v);
            }
        }
        Ok(Val::object(out))
    }
}

/// Stable bottom-up merge sort of `0..n` that checks the time budget as it
/// goes (a plain `sort_by` of millions of items could overrun the time limit).
pub(crate) fn sort_indices(
    n: usize,
    budget: &mut crate::limits::Budget,
    mut cmp: impl FnMut(usize, usize) -> std::cmp::Ordering,
) -> Result<Vec<usize>> {
    let mut cur: Vec<usize> = (0..n).collect();
    let mut next: Vec<usize> = Vec::with_capacity(n);
    let mut width = 1;
    while width < n {
        next.clear();
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut i, mut j) = (start, mid);
            while i < mid && j < end {
                budget.tick()?;
                let (Some(&a), Some(&b)) = (cur.get(i), cur.get(j)) else {
                    break;
                };
                if cmp(a, b) == std::cmp::Ordering::Greater {
                    next.push(b);
                    j += 1;
                } else {
                    next.push(a);
                    i += 1;
                }
            }
            next.extend_from_slice(cur.get(i..mid).unwrap_or(&[]));
            next.extend_from_slice(cur.get(j..end).unwrap_or(&[]));
            start = end;
        }
        std::mem::swap(&mut cur, &mut next);
        width *= 2;
    }
    Ok(cur)
}

/// The grouped value of several members, as repeated `$append` would build
/// it: one member stays as it is, several are concatenated (arrays spliced).
fn join_members(members: Vec<Val>, budget: &mut crate::limits::Budget) -> Result<Option<Val>> {
    if members.len() <= 1 {
        return Ok(members.into_iter().next());
    }
    let mut out = Vec::with_capacity(members.len());
    for m in members {
        match m {
            Val::Arr(items, _) => {
                budget.alloc(items.len())?;
                out.extend(items.iter().cloned());
            }
            other => out.push(other),
        }
    }
    budget.alloc(out.len())?;
    Ok(Some(Val::array(out)))
}

/// Merge the tuples of one group: each binding collects the values of all tuples.
fn reduce_tuples(ts: &[Tuple], budget: &mut crate::limits::Budget) -> Result<Tuple> {
    let mut acc: Vec<(Arc<str>, Vec<Val>)> = Vec::new();
    for t in ts {
        for (k, v) in t.iter() {
            match acc.iter_mut().find(|(n, _)| n == k) {
                Some((_, vals)) => vals.push(v.clone()),
                None => acc.push((k.clone(), vec![v.clone()])),
            }
        }
    }
    let mut out = Vec::with_capacity(acc.len());
    for (k, vals) in acc {
        if let Some(v) = join_members(vals, budget)? {
            out.push((k, v));
        }
    }
    Ok(out)
}

fn group_key(key: Option<Val>, pos: usize) -> Result<Option<Rc<str>>> {
    match key {
        None => Ok(None),
        Some(Val::Str(s)) => Ok(Some(s)),
        Some(other) => Err(Error::at(
            "T1003",
            pos,
            format!(
                "Key in object structure must evaluate to a string; got: {}",
                other.type_name()
            ),
        )),
    }
}

fn duplicate_key(key: &str, pos: usize) -> Error {
    Error::at(
        "D1009",
        pos,
        format!("Multiple key definitions evaluate to same key: {key}"),
    )
}

fn index_of(n: f64, len: usize) -> Option<usize> {
    let mut i = n.floor();
    if i < 0.0 {
        i += len as f64;
    }
    if i >= 0.0 && i < len as f64 {
        Some(i as usize)
    } else {
        None
    }
}

fn predicate_selects(res: Option<&Val>, index: usize, len: usize) -> bool {
    match res {
        Some(Val::Num(n)) => index_of(*n, len) == Some(index),
        Some(Val::Arr(items, _)) if items.iter().all(|x| matches!(x, Val::Num(_))) => items
            .iter()
            .any(|x| matches!(x, Val::Num(n) if index_of(*n, len) == Some(index))),
        other => boolean_of(other),
    }
}

fn check_sort_keys(terms: &[SortTerm], keys: &[Vec<Option<Val>>]) -> Result<()> {
    for (ti, term) in terms.iter().enumerate() {
        let mut seen: Option<&'static str> = None;
        for row in keys {
            match row.get(ti).and_then(|v| v.as_ref()) {
                None => {}
                Some(Val::Num(_)) | Some(Val::Str(_)) => {
                    let t = row
                        .get(ti)
                        .and_then(|v| v.as_ref())
                        .map(|v| v.type_name())
                        .unwrap_or("");
                    match seen {
                        None => seen = Some(t),
                        Some(s) if s != t => {
                            return Err(Error::at(
                                "T2007",
                                term.expr.pos,
                                "Type mismatch when comparing values in order-by clause",
                            ));
                        }
                        _ => {}
                    }
                }
                Some(_) => {
                    return Err(Error::at(
                        "T2008",
                        term.expr.pos,
                        "The expressions within an order-by clause must evaluate to numeric or string values",
                    ));
                }
            }
        }
    }
    Ok(())
}

fn compare_keys(a: Option<&Val>, b: Option<&Val>) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a, b) {
        (None, None) => Equal,
        (None, _) => Greater,
        (_, None) => Less,
        (Some(Val::Num(x)), Some(Val::Num(y))) => x.partial_cmp(y).unwrap_or(Equal),
        (Some(Val::Str(x)), Some(Val::Str(y))) => x.cmp(y),
        _ => Equal,
    }
}
