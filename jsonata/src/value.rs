//! The internal value model. JSON values plus functions, with cheap clones
//! (reference counted) and the array flags the JSONata sequence semantics need.
//! Values never outlive one evaluation: they are converted to
//! `serde_json::Value` on the way out.

use crate::ast::{LambdaDef, Node, TransformDef};
use crate::error::{Error, Result};
use crate::functions::Builtin;
use crate::limits::{MAX_DATA_DEPTH, data_too_deep};
use crate::regex::JRegex;
use indexmap::IndexMap;
use std::rc::Rc;
use std::sync::Arc;

/// Object storage. foldhash with a per-process random seed: much quicker than
/// SipHash on short keys, and still seeded, so colliding keys cannot be
/// prepared in advance.
pub(crate) type Map = IndexMap<Rc<str>, Val, foldhash::fast::RandomState>;

/// Flags carried by an array value (not by its storage, so setting one is a copy
/// of a pointer, not of the items).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Flags(u8);

impl Flags {
    pub const SEQ: u8 = 1;
    pub const KEEP: u8 = 2;
    pub const CONS: u8 = 4;
    pub const OUTER: u8 = 8;
    pub fn has(self, f: u8) -> bool {
        self.0 & f != 0
    }
    pub fn with(self, f: u8) -> Flags {
        Flags(self.0 | f)
    }
}

/// Key of a tuple binding: a variable name (focus/index/`@`) or an ancestor slot.
pub(crate) type Tuple = Vec<(Arc<str>, Val)>;

pub(crate) enum Func {
    Lambda {
        def: Arc<LambdaDef>,
        env: usize,
        input: Option<Val>,
    },
    /// A tail call captured for the trampoline in `apply`.
    Thunk {
        call: Arc<Node>,
        env: usize,
        input: Option<Val>,
        /// First scope of the call that produced this thunk: once the
        /// thunk's arguments are evaluated, that call's scopes are dead.
        base: usize,
    },
    Builtin(&'static Builtin),
    /// A partially applied built-in; `None` marks a `?` placeholder.
    Partial {
        func: Val,
        args: Vec<Option<Option<Val>>>,
    },
    Regex(Arc<JRegex>),
    Transform {
        def: Arc<TransformDef>,
        env: usize,
    },
    Chain(Val, Val),
    /// A lambda whose parameters were partly bound (env holds the bound ones).
    PartialLambda {
        def: Arc<LambdaDef>,
        env: usize,
        input: Option<Val>,
        params: Vec<Arc<str>>,
    },
}

#[derive(Clone)]
pub(crate) enum Val {
    Null,
    Bool(bool),
    Num(f64),
    Str(Rc<str>),
    Arr(Rc<Items>, Flags),
    Obj(Rc<Obj>),
    Func(Rc<Func>),
    /// Internal: a stream of tuples produced by paths with `@`, `#` or `%`.
    Tuples(Rc<Vec<Tuple>>),
}

/// Array storage. Dropping a deeply nested value recursively could exhaust
/// the stack, so uniquely owned children are moved to a heap work list.
#[derive(Clone, Default)]
pub(crate) struct Items(pub Vec<Val>);

/// Object storage, with the same iterative drop.
#[derive(Clone, Default)]
pub(crate) struct Obj(pub Map);

impl std::ops::Deref for Items {
    type Target = Vec<Val>;
    fn deref(&self) -> &Vec<Val> {
        &self.0
    }
}

impl std::ops::Deref for Obj {
    type Target = Map;
    fn deref(&self) -> &Map {
        &self.0
    }
}

fn drain_into(v: Val, stack: &mut Vec<Val>) {
    match v {
        Val::Func(rc) => {
            if let Ok(mut f) = Rc::try_unwrap(rc) {
                f.take_children(stack);
            }
        }
        Val::Arr(rc, _) => {
            if let Ok(mut items) = Rc::try_unwrap(rc) {
                stack.append(&mut items.0);
            }
        }
        Val::Obj(rc) => {
            if let Ok(mut m) = Rc::try_unwrap(rc) {
                stack.extend(m.0.drain(..).map(|(_, v)| v));
            }
        }
        _ => {}
    }
}

impl Func {
    /// Move out the values this function holds (captured input, bound
    /// arguments, composed functions) so they can be dropped iteratively.
    fn take_children(&mut self, stack: &mut Vec<Val>) {
        match self {
            Func::Lambda { input, .. }
            | Func::Thunk { input, .. }
            | Func::PartialLambda { input, .. } => {
                if let Some(v) = input.take() {
                    stack.push(v);
                }
            }
            Func::Partial { func, args } => {
                stack.push(std::mem::replace(func, Val::Null));
                stack.extend(args.drain(..).flatten().flatten());
            }
            Func::Chain(a, b) => {
                stack.push(std::mem::replace(a, Val::Null));
                stack.push(std::mem::replace(b, Val::Null));
            }
            Func::Builtin(_) | Func::Regex(_) | Func::Transform { .. } => {}
        }
    }
}

// Functions can nest (a partial application of a partial application, a
// closure capturing a context that holds a closure, ...) as deeply as data.
impl Drop for Func {
    fn drop(&mut self) {
        let mut stack = Vec::new();
        self.take_children(&mut stack);
        while let Some(v) = stack.pop() {
            drain_into(v, &mut stack);
        }
    }
}

thread_local! {
    /// Levels of container drops running on this thread's stack.
    static DROP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Containers nested up to this depth are dropped recursively (the ordinary
/// way, without a work list to allocate); deeper ones iteratively.
const RECURSIVE_DROP_LEVELS: u32 = 32;

/// Drop `inner` (the contents of a container) recursively if the nesting of
/// drops on this thread allows it; otherwise hand it back.
fn drop_nested<T>(inner: T) -> Option<T> {
    let depth = DROP_DEPTH.with(|d| d.get());
    if depth >= RECURSIVE_DROP_LEVELS {
        return Some(inner);
    }
    DROP_DEPTH.with(|d| d.set(depth + 1));
    drop(inner);
    DROP_DEPTH.with(|d| d.set(depth));
    None
}

impl Drop for Items {
    fn drop(&mut self) {
        if self
            .0
            .iter()
            .all(|v| !matches!(v, Val::Arr(..) | Val::Obj(_) | Val::Func(_)))
        {
            return;
        }
        let Some(mut stack) = drop_nested(std::mem::take(&mut self.0)) else {
            return;
        };
        while let Some(v) = stack.pop() {
            drain_into(v, &mut stack);
        }
    }
}

impl Drop for Obj {
    fn drop(&mut self) {
        if self
            .0
            .values()
            .all(|v| !matches!(v, Val::Arr(..) | Val::Obj(_) | Val::Func(_)))
        {
            return;
        }
        let Some(mut map) = drop_nested(std::mem::take(&mut self.0)) else {
            return;
        };
        let mut stack: Vec<Val> = map.drain(..).map(|(_, v)| v).collect();
        while let Some(v) = stack.pop() {
            drain_into(v, &mut stack);
        }
    }
}

impl Val {
    pub fn str(s: &str) -> Val {
        Val::Str(Rc::from(s))
    }
    pub fn string(s: String) -> Val {
        Val::Str(Rc::from(s))
    }
    pub fn array(items: Vec<Val>) -> Val {
        Val::Arr(Rc::new(Items(items)), Flags::default())
    }
    pub fn seq(items: Vec<Val>) -> Val {
        Val::Arr(Rc::new(Items(items)), Flags::default().with(Flags::SEQ))
    }
    pub fn object(map: Map) -> Val {
        Val::Obj(Rc::new(Obj(map)))
    }
    pub fn is_array(&self) -> bool {
        matches!(self, Val::Arr(..))
    }
    pub fn is_seq(&self) -> bool {
        matches!(self, Val::Arr(_, f) if f.has(Flags::SEQ))
    }
    pub fn with_flag(&self, f: u8) -> Val {
        match self {
            Val::Arr(items, fl) => Val::Arr(items.clone(), fl.with(f)),
            other => other.clone(),
        }
    }
    pub fn as_num(&self) -> Option<f64> {
        match self {
            Val::Num(n) => Some(*n),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The items of an array, or the value itself as a one-item slice.
    pub fn members(&self) -> &[Val] {
        match self {
            Val::Arr(items, _) => items.as_slice(),
            other => std::slice::from_ref(other),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Null => "null",
            Val::Bool(_) => "boolean",
            Val::Num(_) => "number",
            Val::Str(_) => "string",
            Val::Arr(..) | Val::Tuples(_) => "array",
            Val::Obj(_) => "object",
            Val::Func(_) => "function",
        }
    }
}

/// JSONata's truthiness (`$boolean`).
pub(crate) fn truthy(v: Option<&Val>) -> bool {
    match v {
        None => false,
        Some(v) => truthy_val(v),
    }
}

fn truthy_val(v: &Val) -> bool {
    match v {
        Val::Null => false,
        Val::Bool(b) => *b,
        Val::Num(n) => *n != 0.0,
        Val::Str(s) => !s.is_empty(),
        Val::Arr(items, _) => match items.len() {
            0 => false,
            1 => items.first().is_some_and(truthy_val),
            _ => items.iter().any(truthy_val),
        },
        Val::Obj(m) => !m.is_empty(),
        Val::Func(_) => false,
        Val::Tuples(t) => !t.is_empty(),
    }
}

/// Structural equality as `=` and `$distinct` use it.
pub(crate) fn deep_equal(a: &Val, b: &Val) -> Result<bool> {
    deep_eq(a, b, 0)
}

fn deep_eq(a: &Val, b: &Val, depth: usize) -> Result<bool> {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    Ok(match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Num(x), Val::Num(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::Arr(x, _), Val::Arr(y, _)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (p, q) in x.iter().zip(y.iter()) {
                if !deep_eq(p, q, depth + 1)? {
                    return Ok(false);
                }
            }
            true
        }
        (Val::Obj(x), Val::Obj(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (k, v) in x.iter() {
                match y.get(k) {
                    Some(w) => {
                        if !deep_eq(v, w, depth + 1)? {
                            return Ok(false);
                        }
                    }
                    None => return Ok(false),
                }
            }
            true
        }
        (Val::Func(x), Val::Func(y)) => Rc::ptr_eq(x, y),
        _ => false,
    })
}

/// Convert caller data into the internal model, bounding nesting depth.
pub(crate) fn from_json(v: &serde_json::Value, depth: usize) -> Result<Val> {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    Ok(match v {
        serde_json::Value::Null => Val::Null,
        serde_json::Value::Bool(b) => Val::Bool(*b),
        serde_json::Value::Number(n) => Val::Num(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Val::str(s),
        serde_json::Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for x in a {
                out.push(from_json(x, depth + 1)?);
            }
            Val::array(out)
        }
        serde_json::Value::Object(o) => {
            let mut m = Map::with_capacity_and_hasher(o.len(), Default::default());
            for (k, x) in o {
                m.insert(Rc::from(k.as_str()), from_json(x, depth + 1)?);
            }
            Val::object(m)
        }
    })
}

/// A JSON number from an f64: integral values print without a fraction, as
/// JavaScript prints them.
pub(crate) fn json_number(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        serde_json::Value::Number(serde_json::Number::from(n as i64))
    } else {
        serde_json::Number::from_f64(n)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null)
    }
}

/// Convert a result to JSON. Functions become empty strings inside containers
/// and are dropped at the top, as JSON.stringify in the reference would do.
/// `budget` counts approximate serialised bytes to enforce the output bound.
pub(crate) fn to_json(
    v: &Val,
    depth: usize,
    bytes: &mut usize,
    max: usize,
) -> Result<serde_json::Value> {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    *bytes += 8;
    if *bytes > max {
        return Err(Error::new(
            "U1002",
            format!("Output size limit of {max} bytes exceeded"),
        ));
    }
    Ok(match v {
        Val::Null => serde_json::Value::Null,
        Val::Bool(b) => serde_json::Value::Bool(*b),
        Val::Num(n) => {
            if !n.is_finite() {
                return Err(Error::new("D1001", "Number out of range"));
            }
            json_number(*n)
        }
        Val::Str(s) => {
            *bytes += s.len();
            if *bytes > max {
                return Err(Error::new(
                    "U1002",
                    format!("Output size limit of {max} bytes exceeded"),
                ));
            }
            serde_json::Value::String(s.to_string())
        }
        Val::Arr(items, _) => {
            let mut out = Vec::with_capacity(items.len());
            for x in items.iter() {
                out.push(to_json(x, depth + 1, bytes, max)?);
            }
            serde_json::Value::Array(out)
        }
        Val::Obj(m) => {
            let mut out = serde_json::Map::with_capacity(m.len());
            for (k, x) in m.iter() {
                *bytes += k.len();
                out.insert(k.to_string(), to_json(x, depth + 1, bytes, max)?);
            }
            serde_json::Value::Object(out)
        }
        Val::Func(_) => serde_json::Value::String(String::new()),
        Val::Tuples(ts) => {
            let mut out = Vec::new();
            for t in ts.iter() {
                if let Some((_, v)) = t.iter().find(|(k, _)| &**k == "@") {
                    out.push(to_json(v, depth + 1, bytes, max)?);
                }
            }
            serde_json::Value::Array(out)
        }
    })
}

/// Format a number the way JavaScript's `Number.prototype.toString` does.
pub(crate) fn js_number_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if n == 0.0 {
        return "0".into();
    }
    // `{:e}` gives the shortest round-trip digits: d.ddddde±x
    let s = format!("{:e}", n.abs());
    let (mant, exp) = match s.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (s.as_str(), 0),
    };
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let k = digits.len() as i32;
    let e = exp + 1; // position of the decimal point relative to the digits
    let mut out = String::new();
    if n < 0.0 {
        out.push('-');
    }
    if k <= e && e <= 21 {
        out.push_str(&digits);
        for _ in 0..(e - k) {
            out.push('0');
        }
    } else if 0 < e && e <= 21 {
        let (a, b) = digits.split_at(e as usize);
        out.push_str(a);
        out.push('.');
        out.push_str(b);
    } else if -6 < e && e <= 0 {
        out.push_str("0.");
        for _ in 0..(-e) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let (a, b) = digits.split_at(1);
        out.push_str(a);
        if !b.is_empty() {
            out.push('.');
            out.push_str(b);
        }
        out.push('e');
        let x = e - 1;
        if x >= 0 {
            out.push('+');
        }
        out.push_str(&x.to_string());
    }
    out
}

/// `Number(n.toPrecision(15))`: the reference rounds numbers to 15 significant
/// digits whenever it stringifies them.
pub(crate) fn round15(n: f64) -> f64 {
    if !n.is_finite() || n == 0.0 {
        return n;
    }
    format!("{:.14e}", n).parse::<f64>().unwrap_or(n)
}

/// JSON.stringify with the reference's number rounding; functions become "".
pub(crate) fn stringify(
    v: &Val,
    pretty: bool,
    out: &mut String,
    indent: usize,
    depth: usize,
    max: usize,
) -> Result<()> {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    if out.len() > max {
        return Err(Error::new(
            "U1002",
            format!("Output size limit of {max} bytes exceeded"),
        ));
    }
    match v {
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Num(n) => {
            if !n.is_finite() {
                return Err(Error::new("D1001", "Number out of range"));
            }
            let v = if n.fract() == 0.0 { *n } else { round15(*n) };
            out.push_str(&js_number_string(v))
        }
        Val::Str(s) => quote_json(s, out),
        Val::Func(_) => out.push_str("\"\""),
        Val::Arr(..) | Val::Tuples(_) => {
            let items: Vec<Val> = match v {
                Val::Arr(items, _) => items.iter().cloned().collect(),
                Val::Tuples(ts) => ts
                    .iter()
                    .filter_map(|t| t.iter().find(|(k, _)| &**k == "@").map(|(_, v)| v.clone()))
                    .collect(),
                _ => Vec::new(),
            };
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if pretty {
                    newline(out, indent + 1);
                }
                stringify(x, pretty, out, indent + 1, depth + 1, max)?;
            }
            if pretty {
                newline(out, indent);
            }
            out.push(']');
        }
        Val::Obj(m) => {
            if m.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if pretty {
                    newline(out, indent + 1);
                }
                quote_json(k, out);
                out.push(':');
                if pretty {
                    out.push(' ');
                }
                stringify(x, pretty, out, indent + 1, depth + 1, max)?;
            }
            if pretty {
                newline(out, indent);
            }
            out.push('}');
        }
    }
    Ok(())
}

fn newline(out: &mut String, indent: usize) {
    out.push('\n');
    for _ in 0..indent {
        out.push_str("  ");
    }
}

pub(crate) fn quote_json(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Deep copy (fresh containers everywhere), used by the transform operator so
/// that matched objects can be identified by address.
pub(crate) fn deep_clone(v: &Val, depth: usize) -> Result<Val> {
    if depth > MAX_DATA_DEPTH {
        return Err(data_too_deep());
    }
    Ok(match v {
        Val::Arr(items, f) => {
            let mut out = Vec::with_capacity(items.len());
            for x in items.iter() {
                out.push(deep_clone(x, depth + 1)?);
            }
            Val::Arr(Rc::new(Items(out)), *f)
        }
        Val::Obj(m) => {
            let mut out = Map::with_capacity_and_hasher(m.len(), Default::default());
            for (k, x) in m.iter() {
                out.insert(k.clone(), deep_clone(x, depth + 1)?);
            }
            Val::object(out)
        }
        other => other.clone(),
    })
}
