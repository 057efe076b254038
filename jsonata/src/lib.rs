//! A JSONata engine written for QueueBox: safe for untrusted expressions in a long-lived service.
//!
//! ```
//! use queuebox_jsonata::{Bindings, Expression, Limits};
//! let expr = Expression::compile("$sum(items.price) * $rate").unwrap();
//! let mut bindings = Bindings::new();
//! bindings.insert("rate".into(), serde_json::json!(2));
//! let data = serde_json::json!({"items": [{"price": 1}, {"price": 2.5}]});
//! let out = expr.evaluate(&data, &bindings, &Limits::default()).unwrap();
//! assert_eq!(out, Some(serde_json::json!(7)));
//! ```

mod ast;
mod datetime;
mod error;
mod eval;
mod functions;
mod json_text;
mod lexer;
mod limits;
mod number_format;
mod parser;
mod regex;
mod signature;
mod value;

pub use error::Error;
pub use limits::Limits;

use serde_json::Value;
use std::sync::Arc;

/// Per-evaluation variable bindings: name (without `$`) to JSON value.
pub type Bindings = serde_json::Map<String, Value>;

/// A compiled expression. Compile once, evaluate many times, from any thread.
#[derive(Debug, Clone)]
pub struct Expression {
    root: Arc<ast::Node>,
    source: Arc<str>,
}

impl Expression {
    /// Parse an expression. Syntax errors carry an `S0xxx` code and a position.
    pub fn compile(source: &str) -> Result<Expression, Error> {
        let root = parser::Parser::parse(source)?;
        Ok(Expression {
            root: Arc::new(root),
            source: Arc::from(source),
        })
    }

    /// The source text this expression was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluate against `input`. `Ok(None)` means the result is undefined
    /// (no match), which is different from `Ok(Some(Value::Null))`.
    pub fn evaluate(
        &self,
        input: &Value,
        bindings: &Bindings,
        limits: &Limits,
    ) -> Result<Option<Value>, Error> {
        self.evaluate_opt(Some(input), bindings, limits)
    }

    /// Like [`Expression::evaluate`], with an optional (undefined) input.
    pub fn evaluate_opt(
        &self,
        input: Option<&Value>,
        bindings: &Bindings,
        limits: &Limits,
    ) -> Result<Option<Value>, Error> {
        let input = match input {
            Some(v) => Some(value::from_json(v, 0)?),
            None => None,
        };
        match self.run(input, bindings, limits)? {
            None => Ok(None),
            Some(v) => {
                let mut bytes = 0usize;
                let out = value::to_json(&v, 0, &mut bytes, limits.max_output_bytes)?;
                Ok(Some(out))
            }
        }
    }

    /// Evaluate against a payload given as JSON text and return the result as
    /// JSON text (`Ok(None)`: undefined). Gives the same result as parsing the
    /// text with `serde_json`, calling [`Expression::evaluate`] and
    /// serialising the result with `serde_json::to_string`, without building
    /// `serde_json::Value` trees on the way. Text that is not JSON fails with
    /// `J0001` (serde_json's parser, which also refuses nesting deeper than
    /// 128 levels).
    pub fn evaluate_json(
        &self,
        input: &str,
        bindings: &Bindings,
        limits: &Limits,
    ) -> Result<Option<String>, Error> {
        let input = json_text::parse(input)?;
        match self.run(Some(input), bindings, limits)? {
            None => Ok(None),
            Some(v) => json_text::write(&v, limits.max_output_bytes).map(Some),
        }
    }

    /// Evaluate with the input already converted; `None` for an undefined
    /// result (a function at the top level is undefined too).
    fn run(
        &self,
        input: Option<value::Val>,
        bindings: &Bindings,
        limits: &Limits,
    ) -> Result<Option<value::Val>, Error> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as f64)
            .unwrap_or(0.0);
        let mut ctx = eval::Ctx::new(limits::Budget::new(limits), now);
        for (k, v) in bindings {
            let v = value::from_json(v, 0)?;
            // accept "topic" and "$topic" alike
            let name = k.strip_prefix('$').unwrap_or(k);
            ctx.bind(0, Arc::from(name), Some(v));
        }
        ctx.bind(0, Arc::from("$"), input.clone());
        // a top-level array is wrapped so that paths treat it as one value
        let wrapped = match input {
            Some(value::Val::Arr(items, f)) if !f.has(value::Flags::SEQ) => Some(value::Val::Arr(
                std::rc::Rc::new(value::Items(vec![value::Val::Arr(items, f)])),
                value::Flags::default()
                    .with(value::Flags::SEQ)
                    .with(value::Flags::OUTER),
            )),
            other => other,
        };
        match ctx.eval(&self.root, wrapped.as_ref(), 0)? {
            None | Some(value::Val::Func(_)) => Ok(None),
            Some(v) => Ok(Some(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expression_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Expression>();
    }
}
