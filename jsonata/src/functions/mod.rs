//! The built-in function library, one module per family. Each built-in
//! declares its signature; arguments are validated (and the context value
//! substituted for `-` parameters) before the implementation runs.

mod array;
mod datetime_fns;
mod hof;
mod numeric;
pub(crate) use numeric::round_half_even as numeric_round_half_even;
mod object;
mod string;

use crate::error::{Error, Result};
use crate::eval::Ctx;
use crate::regex::JRegex;
use crate::signature::Signature;
use crate::value::{Func, Map, Val, stringify, truthy};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{LazyLock, OnceLock};

pub(crate) type Args = Vec<Option<Val>>;
pub(crate) type BuiltinFn = fn(&mut Ctx, Args, Option<&Val>, usize) -> Result<Option<Val>>;

pub(crate) struct Builtin {
    pub name: &'static str,
    sig_src: &'static str,
    sig: OnceLock<Option<Signature>>,
    /// Number of parameters a higher-order function passes to it.
    pub arity: usize,
    pub func: BuiltinFn,
}

impl Builtin {
    const fn new(
        name: &'static str,
        sig_src: &'static str,
        arity: usize,
        func: BuiltinFn,
    ) -> Builtin {
        Builtin {
            name,
            sig_src,
            sig: OnceLock::new(),
            arity,
            func,
        }
    }

    pub fn signature(&self) -> Option<&Signature> {
        self.sig
            .get_or_init(|| Signature::parse(self.sig_src).ok())
            .as_ref()
    }
}

impl std::fmt::Debug for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${}", self.name)
    }
}

static BUILTINS: [Builtin; 64] = [
    // string
    Builtin::new("string", "<x-b?:s>", 1, string::string),
    Builtin::new("length", "<s-:n>", 1, string::length),
    Builtin::new("substring", "<s-nn?:s>", 3, string::substring),
    Builtin::new("substringBefore", "<s-s:s>", 2, string::substring_before),
    Builtin::new("substringAfter", "<s-s:s>", 2, string::substring_after),
    Builtin::new("uppercase", "<s-:s>", 1, string::uppercase),
    Builtin::new("lowercase", "<s-:s>", 1, string::lowercase),
    Builtin::new("trim", "<s-:s>", 1, string::trim),
    Builtin::new("pad", "<s-ns?:s>", 3, string::pad),
    Builtin::new("contains", "<s-(sf):b>", 2, string::contains),
    Builtin::new("split", "<s-(sf)n?:a<s>>", 3, string::split),
    Builtin::new("join", "<a<s>s?:s>", 2, string::join),
    Builtin::new("match", "<s-f<s:o>n?:a<o>>", 3, string::match_),
    Builtin::new("replace", "<s-(sf)(sf)n?:s>", 4, string::replace),
    Builtin::new("eval", "<sx?:x>", 2, string::eval),
    Builtin::new("base64encode", "<s-:s>", 1, string::base64encode),
    Builtin::new("base64decode", "<s-:s>", 1, string::base64decode),
    Builtin::new(
        "encodeUrlComponent",
        "<s-:s>",
        1,
        string::encode_url_component,
    ),
    Builtin::new("encodeUrl", "<s-:s>", 1, string::encode_url),
    Builtin::new(
        "decodeUrlComponent",
        "<s-:s>",
        1,
        string::decode_url_component,
    ),
    Builtin::new("decodeUrl", "<s-:s>", 1, string::decode_url),
    Builtin::new("formatNumber", "<n-so?:s>", 3, numeric::format_number),
    Builtin::new("formatBase", "<n-n?:s>", 2, numeric::format_base),
    Builtin::new("formatInteger", "<n-s:s>", 2, numeric::format_integer),
    Builtin::new("parseInteger", "<s-s:n>", 2, numeric::parse_integer),
    // numeric
    Builtin::new("number", "<(nsb)-:n>", 1, numeric::number),
    Builtin::new("abs", "<n-:n>", 1, numeric::abs),
    Builtin::new("floor", "<n-:n>", 1, numeric::floor),
    Builtin::new("ceil", "<n-:n>", 1, numeric::ceil),
    Builtin::new("round", "<n-n?:n>", 2, numeric::round),
    Builtin::new("power", "<n-n:n>", 2, numeric::power),
    Builtin::new("sqrt", "<n-:n>", 1, numeric::sqrt),
    Builtin::new("random", "<:n>", 0, numeric::random),
    Builtin::new("sum", "<a<n>:n>", 1, numeric::sum),
    Builtin::new("max", "<a<n>:n>", 1, numeric::max),
    Builtin::new("min", "<a<n>:n>", 1, numeric::min),
    Builtin::new("average", "<a<n>:n>", 1, numeric::average),
    // boolean
    Builtin::new("boolean", "<x-:b>", 1, boolean),
    Builtin::new("not", "<x-:b>", 1, not),
    Builtin::new("exists", "<x:b>", 1, exists),
    // array
    Builtin::new("count", "<a:n>", 1, array::count),
    Builtin::new("append", "<xx:a>", 2, array::append_fn),
    Builtin::new("sort", "<af?:a>", 2, array::sort),
    Builtin::new("reverse", "<a:a>", 1, array::reverse),
    Builtin::new("shuffle", "<a:a>", 1, array::shuffle),
    Builtin::new("distinct", "<x:x>", 1, array::distinct),
    Builtin::new("zip", "<a+>", 1, array::zip),
    // object
    Builtin::new("keys", "<x-:a<s>>", 1, object::keys),
    Builtin::new("lookup", "<x-s:x>", 2, object::lookup_fn),
    Builtin::new("spread", "<x-:a<o>>", 1, object::spread),
    Builtin::new("merge", "<a<o>:o>", 1, object::merge),
    Builtin::new("sift", "<o-f?:o>", 2, hof::sift),
    Builtin::new("each", "<o-f?:a>", 2, hof::each),
    Builtin::new("error", "<s?:x>", 1, object::error),
    Builtin::new("assert", "<bs?:x>", 2, object::assert),
    Builtin::new("type", "<x:s>", 1, object::type_of),
    // higher order
    Builtin::new("map", "<af>", 2, hof::map),
    Builtin::new("filter", "<af>", 2, hof::filter),
    Builtin::new("single", "<af?>", 2, hof::single),
    Builtin::new("reduce", "<afj?:j>", 3, hof::reduce),
    // date/time
    Builtin::new("now", "<s?s?:s>", 2, datetime_fns::now),
    Builtin::new("millis", "<:n>", 0, datetime_fns::millis),
    Builtin::new("fromMillis", "<n-s?s?:s>", 3, datetime_fns::from_millis),
    Builtin::new("toMillis", "<s-s?:n>", 2, datetime_fns::to_millis),
];

static INDEX: LazyLock<HashMap<&'static str, &'static Builtin>> =
    LazyLock::new(|| BUILTINS.iter().map(|b| (b.name, b)).collect());

pub(crate) fn lookup(name: &str) -> Option<&'static Builtin> {
    INDEX.get(name).copied()
}

/// JSONata truthiness of a possibly undefined value.
pub(crate) fn boolean_of(v: Option<&Val>) -> bool {
    truthy(v)
}

/// `$string` for a defined value (also used by `&`).
pub(crate) fn to_js_string(v: &Val, max: usize) -> Result<String> {
    match v {
        Val::Str(s) => Ok(s.to_string()),
        Val::Func(_) => Ok(String::new()),
        Val::Num(n) if !n.is_finite() => Err(Error::new(
            "D3001",
            "Attempting to invoke string function on Infinity or NaN",
        )),
        other => {
            let mut out = String::new();
            stringify(other, false, &mut out, 0, 0, max)?;
            Ok(out)
        }
    }
}

/// How many arguments a function value wants (for callbacks of `$map` etc.).
pub(crate) fn arity(f: &Val) -> usize {
    let mut f = f;
    // a composition takes the arguments of its first function (iterative:
    // compositions can nest deeply)
    loop {
        return match f {
            Val::Func(func) => match &**func {
                Func::Lambda { def, .. } => def.params.len(),
                Func::PartialLambda { params, .. } => params.len(),
                Func::Builtin(b) => b.arity,
                Func::Partial { args, .. } => args.iter().filter(|a| a.is_none()).count(),
                Func::Chain(a, _) => {
                    f = a;
                    continue;
                }
                Func::Regex(_) | Func::Transform { .. } | Func::Thunk { .. } => 1,
            },
            _ => 0,
        };
    }
}

/// Arguments for a callback `(value, index, array)` trimmed to its arity.
pub(crate) fn callback_args(f: &Val, v: &Val, i: usize, arr: &Val) -> Args {
    let n = arity(f);
    let mut args = vec![Some(v.clone())];
    if n >= 2 {
        args.push(Some(Val::Num(i as f64)));
    }
    if n >= 3 {
        args.push(Some(arr.clone()));
    }
    args
}

/// Build the match object a regex matcher returns (`match`, `start`, `end`, `groups`).
pub(crate) fn regex_match_object(re: &JRegex, s: &str, from: usize) -> Option<Val> {
    let caps = re.re.captures_at(s, from)?;
    let m = caps.get(0)?;
    let mut obj = Map::default();
    obj.insert(Rc::from("match"), Val::str(m.as_str()));
    obj.insert(Rc::from("start"), Val::Num(char_index(s, m.start()) as f64));
    obj.insert(Rc::from("end"), Val::Num(char_index(s, m.end()) as f64));
    let groups: Vec<Val> = caps
        .iter()
        .skip(1)
        .map(|g| {
            g.map(|g| Val::str(g.as_str()))
                .unwrap_or_else(|| Val::str(""))
        })
        .collect();
    obj.insert(Rc::from("groups"), Val::array(groups));
    Some(Val::object(obj))
}

/// Convert a byte offset into a character (code point) offset.
pub(crate) fn char_index(s: &str, byte: usize) -> usize {
    s.get(..byte).map(|p| p.chars().count()).unwrap_or(0)
}

fn boolean(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> Result<Option<Val>> {
    match args.into_iter().next().flatten() {
        None => Ok(None),
        Some(v) => Ok(Some(Val::Bool(truthy(Some(&v))))),
    }
}

fn not(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> Result<Option<Val>> {
    match args.into_iter().next().flatten() {
        None => Ok(None),
        Some(v) => Ok(Some(Val::Bool(!truthy(Some(&v))))),
    }
}

fn exists(_: &mut Ctx, args: Args, _: Option<&Val>, _: usize) -> Result<Option<Val>> {
    Ok(Some(Val::Bool(args.first().is_some_and(|a| a.is_some()))))
}

/// Positional argument accessors.
pub(crate) fn arg(args: &Args, i: usize) -> Option<&Val> {
    args.get(i).and_then(|a| a.as_ref())
}

pub(crate) fn arg_str(args: &Args, i: usize) -> Option<Rc<str>> {
    match arg(args, i) {
        Some(Val::Str(s)) => Some(s.clone()),
        _ => None,
    }
}

pub(crate) fn arg_num(args: &Args, i: usize) -> Option<f64> {
    match arg(args, i) {
        Some(Val::Num(n)) => Some(*n),
        _ => None,
    }
}
