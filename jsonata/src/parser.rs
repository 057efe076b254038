//! Pratt parser producing the raw tree, then `process` rewrites it into the
//! evaluable form (paths as step lists, predicates attached to steps, parent
//! references resolved, tail calls marked). Nesting is bounded so that no
//! input can exhaust the stack here or later in the evaluator.

use crate::ast::{BinOp, Kind, LambdaDef, Node, SortTerm, Stage, TransformDef};
use crate::error::{Error, Result};
use crate::lexer::{Lexer, Lit, Tok, Token};
use crate::regex::JRegex;
use crate::signature::Signature;
use std::sync::Arc;

/// Maximum nesting depth of an expression tree.
pub(crate) const MAX_AST_DEPTH: usize = 400;

use crate::limits::{COMPILE_STACK_BYTES, StackGuard};

struct Slot {
    label: usize,
    level: i32,
}

pub(crate) struct Parser {
    lex: Lexer,
    tok: Token,
    prev_operand: bool,
    depth: usize,
    slots: Vec<Slot>,
    stack: StackGuard,
}

fn too_deep(pos: usize) -> Error {
    Error::at(
        "U1001",
        pos,
        format!("Expression nesting exceeds {MAX_AST_DEPTH} levels"),
    )
}

fn node_depth(n: &mut Node) -> usize {
    let mut d = 0usize;
    n.for_each_child_mut(&mut |c| {
        d = d.max(c.depth_cache);
    });
    d + 1
}

fn lbp(tok: &Tok) -> u32 {
    match tok {
        Tok::Op(op) => match *op {
            "." => 75,
            "[" | "(" | "@" | "#" => 80,
            "{" => 70,
            "?" => 20,
            "+" | "-" | "&" => 50,
            "*" | "/" | "%" => 60,
            "=" | "<" | ">" | "!=" | "<=" | ">=" | "^" | "~>" | "in" | "?:" | "??" => 40,
            ".." => 20,
            ":=" => 10,
            "and" => 30,
            "or" => 25,
            _ => 0,
        },
        _ => 0,
    }
}

fn tok_text(t: &Tok) -> String {
    match t {
        Tok::Op(o) => o.to_string(),
        Tok::Str(s) => s.clone(),
        Tok::Num(n) => crate::value::js_number_string(*n),
        Tok::Name(n, _) => n.clone(),
        Tok::Var(v) => format!("${v}"),
        Tok::Value(Lit::True) => "true".into(),
        Tok::Value(Lit::False) => "false".into(),
        Tok::Value(Lit::Null) => "null".into(),
        Tok::Regex(p, _) => format!("/{p}/"),
        Tok::End => "(end)".into(),
    }
}

impl Parser {
    pub fn parse(src: &str) -> Result<Node> {
        Self::parse_with_stack(src, COMPILE_STACK_BYTES)
    }

    /// Parse with an explicit native stack budget (used by `$eval`, which
    /// parses while an evaluation already occupies part of the stack).
    pub fn parse_with_stack(src: &str, stack_budget: usize) -> Result<Node> {
        let mut lex = Lexer::new(src);
        let tok = lex.next(true)?;
        let mut p = Parser {
            lex,
            tok,
            prev_operand: false,
            depth: 0,
            slots: Vec::new(),
            stack: StackGuard::new(stack_budget),
        };
        let raw = p.expression(0)?;
        if p.tok.tok != Tok::End {
            return Err(Error::at(
                "S0201",
                p.tok.pos,
                format!("Syntax error: {}", tok_text(&p.tok.tok)),
            )
            .with_token(tok_text(&p.tok.tok)));
        }
        let mut node = p.process(raw)?;
        // a `%` that climbed out of the whole expression has no parent
        if !node.seeking_parent.is_empty() || matches!(node.kind, Kind::Parent(_)) {
            return Err(Error::at(
                "S0217",
                node.pos,
                "The object representing the 'parent' cannot be derived from this expression",
            ));
        }
        p.assign_labels(&mut node);
        Ok(node)
    }

    fn advance(&mut self) -> Result<Token> {
        let cur = std::mem::replace(
            &mut self.tok,
            Token {
                tok: Tok::End,
                pos: 0,
            },
        );
        self.prev_operand = matches!(
            cur.tok,
            Tok::Name(..)
                | Tok::Var(_)
                | Tok::Str(_)
                | Tok::Num(_)
                | Tok::Value(_)
                | Tok::Regex(..)
                | Tok::Op(")")
                | Tok::Op("]")
                | Tok::Op("}")
        );
        self.tok = self.lex.next(!self.prev_operand)?;
        Ok(cur)
    }

    fn expect(&mut self, op: &'static str) -> Result<()> {
        if self.tok.tok == Tok::Op(op) {
            self.advance()?;
            return Ok(());
        }
        if self.tok.tok == Tok::End {
            return Err(Error::at(
                "S0203",
                self.tok.pos,
                format!("Expected \"{op}\" before end of expression"),
            )
            .with_token(op));
        }
        Err(Error::at(
            "S0202",
            self.tok.pos,
            format!("Expected \"{op}\", got \"{}\"", tok_text(&self.tok.tok)),
        )
        .with_token(tok_text(&self.tok.tok)))
    }

    fn is(&self, op: &str) -> bool {
        matches!(&self.tok.tok, Tok::Op(o) if *o == op)
    }

    fn finish(&self, mut n: Node) -> Result<Node> {
        let d = node_depth(&mut n);
        n.depth_cache = d;
        if d > MAX_AST_DEPTH {
            return Err(too_deep(n.pos));
        }
        Ok(n)
    }

    fn expression(&mut self, rbp: u32) -> Result<Node> {
        self.depth += 1;
        if self.depth > MAX_AST_DEPTH || self.stack.check().is_err() {
            return Err(too_deep(self.tok.pos));
        }
        let r = self.expression_inner(rbp);
        self.depth -= 1;
        r
    }

    #[inline(never)]
    fn expression_inner(&mut self, rbp: u32) -> Result<Node> {
        let t = self.advance()?;
        let mut left = self.nud(t)?;
        while rbp < lbp(&self.tok.tok) {
            let t = self.advance()?;
            left = self.led(t, left)?;
        }
        Ok(left)
    }

    #[inline(never)]
    fn nud(&mut self, t: Token) -> Result<Node> {
        let pos = t.pos;
        let kind = match t.tok {
            Tok::End => return Err(Error::at("S0207", pos, "Unexpected end of expression")),
            Tok::Str(s) => Kind::Str(Arc::from(s)),
            Tok::Num(n) => Kind::Num(n),
            Tok::Name(n, _) => Kind::Name(Arc::from(n)),
            Tok::Var(v) => Kind::Variable(Arc::from(v)),
            Tok::Value(Lit::True) => Kind::Bool(true),
            Tok::Value(Lit::False) => Kind::Bool(false),
            Tok::Value(Lit::Null) => Kind::Null,
            Tok::Regex(p, f) => Kind::Regex(Arc::new(
                JRegex::new(&p, &f).map_err(|e| e.pos_if_none(pos))?,
            )),
            Tok::Op(op) => match op {
                "and" | "or" | "in" => Kind::Name(Arc::from(op)),
                "-" => {
                    let operand = self.expression(70)?;
                    Kind::Neg(Box::new(operand))
                }
                "*" => Kind::Wildcard,
                "**" => Kind::Descendant,
                "%" => Kind::Parent(0),
                "?" => Kind::Placeholder,
                "(" => self.nud_block()?,
                "[" => self.nud_array()?,
                "{" => Kind::Object(self.pairs()?),
                "|" => self.nud_transform()?,
                other => {
                    return Err(Error::at(
                        "S0211",
                        pos,
                        format!("The symbol {other} cannot be used as a unary operator"),
                    )
                    .with_token(other));
                }
            },
        };
        self.finish(Node::new(kind, pos))
    }

    #[inline(never)]
    fn nud_block(&mut self) -> Result<Kind> {
        let mut items = Vec::new();
        while !self.is(")") {
            items.push(self.expression(0)?);
            if !self.is(";") {
                break;
            }
            self.advance()?;
        }
        self.expect(")")?;
        Ok(Kind::Block(items))
    }

    #[inline(never)]
    fn nud_array(&mut self) -> Result<Kind> {
        let mut items = Vec::new();
        if !self.is("]") {
            loop {
                items.push(self.expression(0)?);
                if !self.is(",") {
                    break;
                }
                self.advance()?;
            }
        }
        self.expect("]")?;
        Ok(Kind::Array(items))
    }

    #[inline(never)]
    fn nud_transform(&mut self) -> Result<Kind> {
        let pattern = self.expression(0)?;
        self.expect("|")?;
        let update = self.expression(0)?;
        let delete = if self.is(",") {
            self.advance()?;
            Some(self.expression(0)?)
        } else {
            None
        };
        self.expect("|")?;
        Ok(Kind::Transform(Arc::new(TransformDef {
            pattern,
            update,
            delete,
        })))
    }

    #[inline(never)]
    fn pairs(&mut self) -> Result<Vec<(Node, Node)>> {
        let mut pairs = Vec::new();
        if !self.is("}") {
            loop {
                let k = self.expression(0)?;
                self.expect(":")?;
                let v = self.expression(0)?;
                pairs.push((k, v));
                if !self.is(",") {
                    break;
                }
                self.advance()?;
            }
        }
        self.expect("}")?;
        Ok(pairs)
    }

    #[inline(never)]
    fn led(&mut self, t: Token, left: Node) -> Result<Node> {
        let pos = t.pos;
        let Tok::Op(op) = t.tok else {
            return Err(Error::at("S0201", pos, "Syntax error"));
        };
        let bin = |o: BinOp| Some(o);
        let binop = match op {
            "+" => bin(BinOp::Add),
            "-" => bin(BinOp::Sub),
            "*" => bin(BinOp::Mul),
            "/" => bin(BinOp::Div),
            "%" => bin(BinOp::Mod),
            "=" => bin(BinOp::Eq),
            "!=" => bin(BinOp::Ne),
            "<" => bin(BinOp::Lt),
            "<=" => bin(BinOp::Le),
            ">" => bin(BinOp::Gt),
            ">=" => bin(BinOp::Ge),
            "&" => bin(BinOp::Concat),
            "and" => bin(BinOp::And),
            "or" => bin(BinOp::Or),
            "in" => bin(BinOp::In),
            ".." => bin(BinOp::Range),
            "??" => bin(BinOp::Coalesce),
            "?:" => bin(BinOp::Elvis),
            _ => None,
        };
        if let Some(b) = binop {
            let rhs = self.expression(lbp(&Tok::Op(op)))?;
            return self.finish(Node::new(
                Kind::Binary(b, Box::new(left), Box::new(rhs)),
                pos,
            ));
        }
        self.led_other(op, pos, left)
    }

    #[inline(never)]
    fn led_other(&mut self, op: &'static str, pos: usize, left: Node) -> Result<Node> {
        let kind = match op {
            "." => {
                let rhs = self.expression(75)?;
                Kind::Dot(Box::new(left), Box::new(rhs))
            }
            "~>" => {
                let rhs = self.expression(40)?;
                Kind::Apply(Box::new(left), Box::new(rhs))
            }
            ":=" => {
                let Kind::Variable(name) = &left.kind else {
                    return Err(Error::at(
                        "S0212",
                        pos,
                        "The left side of := must be a variable name (start with $)",
                    ));
                };
                let name = name.clone();
                let rhs = self.expression(9)?;
                Kind::Bind(name, Box::new(rhs))
            }
            "@" | "#" => {
                let t2 = self.advance()?;
                let Tok::Var(v) = t2.tok else {
                    return Err(Error::at(
                        "S0214",
                        t2.pos,
                        format!("The right side of {op} must be a variable name (start with $)"),
                    )
                    .with_token(op));
                };
                if op == "@" {
                    Kind::FocusBind(Box::new(left), Arc::from(v))
                } else {
                    Kind::IndexBind(Box::new(left), Arc::from(v))
                }
            }
            "?" => {
                let then = self.expression(0)?;
                let els = if self.is(":") {
                    self.advance()?;
                    Some(Box::new(self.expression(0)?))
                } else {
                    None
                };
                Kind::Condition(Box::new(left), Box::new(then), els)
            }
            "[" => {
                if self.is("]") {
                    self.advance()?;
                    // `[]` flags the innermost non-predicate operand to keep singleton arrays
                    let mut left = left;
                    mark_keep_array(&mut left);
                    return Ok(left);
                }
                let rhs = self.expression(0)?;
                self.expect("]")?;
                Kind::Pred(Box::new(left), Box::new(rhs))
            }
            "{" => {
                let pairs = self.pairs()?;
                Kind::GroupBy(Box::new(left), pairs)
            }
            "^" => {
                self.expect("(")?;
                let mut terms = Vec::new();
                loop {
                    let mut descending = false;
                    if self.is("<") {
                        self.advance()?;
                    } else if self.is(">") {
                        descending = true;
                        self.advance()?;
                    }
                    let expr = self.expression(0)?;
                    terms.push(SortTerm { descending, expr });
                    if !self.is(",") {
                        break;
                    }
                    self.advance()?;
                }
                self.expect(")")?;
                Kind::SortRaw(Box::new(left), terms)
            }
            "(" => {
                if let Kind::Name(n) = &left.kind
                    && (&**n == "function" || &**n == "λ")
                {
                    return self.lambda(pos);
                }
                let mut args = Vec::new();
                let mut partial = false;
                if !self.is(")") {
                    loop {
                        if self.is("?") {
                            let t = self.advance()?;
                            args.push(Node::new(Kind::Placeholder, t.pos));
                            partial = true;
                        } else {
                            args.push(self.expression(0)?);
                        }
                        if !self.is(",") {
                            break;
                        }
                        self.advance()?;
                    }
                }
                self.expect(")")?;
                if partial {
                    Kind::Partial(Box::new(left), args)
                } else {
                    Kind::Call(Box::new(left), args)
                }
            }
            other => {
                return Err(
                    Error::at("S0201", pos, format!("Syntax error: {other}")).with_token(other)
                );
            }
        };
        self.finish(Node::new(kind, pos))
    }

    fn lambda(&mut self, pos: usize) -> Result<Node> {
        let mut params = Vec::new();
        if !self.is(")") {
            loop {
                let t = self.advance()?;
                match t.tok {
                    Tok::Var(v) => params.push(Arc::<str>::from(v)),
                    other => {
                        return Err(Error::at("S0208", t.pos, format!("Parameter {} of function definition must be a variable name (start with $)", tok_text(&other)))
                            .with_token(tok_text(&other)));
                    }
                }
                if !self.is(",") {
                    break;
                }
                self.advance()?;
            }
        }
        // the signature sits between `)` and `{`, read raw from the source
        let signature = if self.is(")") {
            let sig = self.lex.signature()?;
            self.prev_operand = true;
            self.tok = self.lex.next(false)?;
            match sig {
                Some(s) => Some(Signature::parse(&s).map_err(|e| e.pos_if_none(pos))?),
                None => None,
            }
        } else {
            self.expect(")")?;
            None
        };
        self.expect("{")?;
        let body = self.expression(0)?;
        self.expect("}")?;
        let def = LambdaDef {
            params,
            signature,
            body,
        };
        self.finish(Node::new(Kind::Lambda(Arc::new(def)), pos))
    }

    // ----- processing -----

    fn process(&mut self, n: Node) -> Result<Node> {
        self.depth += 1;
        if self.depth > MAX_AST_DEPTH * 2 || self.stack.check().is_err() {
            return Err(too_deep(n.pos));
        }
        let r = self.process_inner(n);
        self.depth -= 1;
        r
    }

    fn process_inner(&mut self, n: Node) -> Result<Node> {
        let pos = n.pos;
        let keep_array = n.keep_array;
        let Node { kind, .. } = n;
        let mut result = match kind {
            Kind::Dot(l, r) => self.arm_dot(l, r, pos, keep_array)?,
            Kind::Pred(l, r) => self.arm_pred(l, r, pos, keep_array)?,
            Kind::GroupBy(l, pairs) => self.arm_group_by(l, pairs, pos, keep_array)?,
            Kind::SortRaw(l, terms) => self.arm_sort_raw(l, terms, pos, keep_array)?,
            Kind::FocusBind(l, var) => self.arm_focus_bind(l, var, pos, keep_array)?,
            Kind::IndexBind(l, var) => self.arm_index_bind(l, var, pos, keep_array)?,
            Kind::Name(name) => {
                let mut step = Node::new(Kind::Name(name), pos);
                step.keep_array = keep_array;
                let mut p = Node::new(Kind::Path(vec![step]), pos);
                p.keep_singleton = keep_array;
                return Ok(p);
            }
            Kind::Parent(_) => {
                let id = self.slots.len();
                self.slots.push(Slot {
                    label: id,
                    level: 1,
                });
                Node::new(Kind::Parent(id), pos)
            }
            Kind::Binary(op, l, r) => self.arm_binary(op, l, r, pos, keep_array)?,
            Kind::Apply(l, r) => self.arm_apply(l, r, pos, keep_array)?,
            Kind::Bind(name, r) => self.arm_bind(name, r, pos, keep_array)?,
            Kind::Neg(e) => self.arm_neg(e, pos, keep_array)?,
            Kind::Array(items) => self.arm_array(items, pos, keep_array)?,
            Kind::Object(pairs) => self.arm_object(pairs, pos, keep_array)?,
            Kind::Block(items) => self.arm_block(items, pos, keep_array)?,
            Kind::Condition(c, t, e) => self.arm_condition(c, t, e, pos, keep_array)?,
            Kind::Call(p, args) => self.arm_call(p, args, pos, keep_array)?,
            Kind::Partial(p, args) => self.arm_partial(p, args, pos, keep_array)?,
            Kind::Lambda(def) => self.arm_lambda(def, pos, keep_array)?,
            Kind::Transform(def) => self.arm_transform(def, pos, keep_array)?,
            other => Node::new(other, pos),
        };
        if keep_array {
            result.keep_array = true;
        }
        Ok(result)
    }

    #[inline(never)]
    fn arm_dot(
        &mut self,
        l: Box<Node>,
        r: Box<Node>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let lstep = self.process(*l)?;
            let mut result = if matches!(lstep.kind, Kind::Path(_)) {
                lstep
            } else {
                let seeking = if let Kind::Parent(slot) = lstep.kind {
                    vec![slot]
                } else {
                    Vec::new()
                };
                let mut p = Node::new(Kind::Path(vec![lstep]), pos);
                p.seeking_parent = seeking;
                p
            };
            let mut rest = self.process(*r)?;
            let mut new_steps = Vec::new();
            if let Kind::Path(steps) = &mut rest.kind {
                new_steps.append(steps);
                // carry unresolved parent slots of the nested path
                result.seeking_parent.append(&mut rest.seeking_parent);
                if rest.keep_singleton {
                    result.keep_singleton = true;
                }
            } else {
                if !rest.predicate.is_empty() {
                    rest.stages = std::mem::take(&mut rest.predicate);
                }
                new_steps.push(rest);
            }
            if let Kind::Path(steps) = &mut result.kind {
                steps.append(&mut new_steps);
                for step in steps.iter_mut() {
                    match &step.kind {
                        Kind::Num(_) | Kind::Bool(_) | Kind::Null => {
                            return Err(Error::at(
                                "S0213",
                                step.pos,
                                "The literal value cannot be used as a step within a path expression",
                            ));
                        }
                        Kind::Str(s) => {
                            let s = s.clone();
                            step.kind = Kind::Name(s);
                        }
                        _ => {}
                    }
                }
                if steps.iter().any(|s| s.keep_array) {
                    result.keep_singleton = true;
                }
                if let Some(first) = steps.first_mut()
                    && is_cons(first)
                {
                    first.cons_array = true;
                }
                if let Some(last) = steps.last_mut()
                    && is_cons(last)
                {
                    last.cons_array = true;
                }
            }
            self.resolve_ancestry(&mut result)?;
            result
        })
    }

    #[inline(never)]
    fn arm_pred(
        &mut self,
        l: Box<Node>,
        r: Box<Node>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let mut result = self.process(*l)?;
            let mut predicate = self.process(*r)?;
            let is_path = matches!(result.kind, Kind::Path(_));
            let step: &mut Node = match &mut result.kind {
                Kind::Path(steps) if is_path => match steps.last_mut() {
                    Some(s) => s,
                    None => return Err(Error::at("S0201", pos, "Syntax error")),
                },
                _ => &mut result,
            };
            if step.group.is_some() {
                return Err(Error::at(
                    "S0209",
                    pos,
                    "A predicate cannot follow a grouping expression in a step",
                ));
            }
            if !predicate.seeking_parent.is_empty() {
                let slots = predicate.seeking_parent.clone();
                for slot in slots {
                    if self.slots.get(slot).is_some_and(|s| s.level == 1) {
                        self.seek_parent(step, slot)?;
                    } else if let Some(s) = self.slots.get_mut(slot) {
                        s.level -= 1;
                    }
                }
                push_ancestry(step, &predicate);
            }
            predicate.seeking_parent.clear();
            if is_path {
                step.stages.push(Stage::Filter(Box::new(predicate)));
            } else {
                step.predicate.push(Stage::Filter(Box::new(predicate)));
            }
            result
        })
    }

    #[inline(never)]
    fn arm_group_by(
        &mut self,
        l: Box<Node>,
        pairs: Vec<(Node, Node)>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let mut result = self.process(*l)?;
            if result.group.is_some() {
                return Err(Error::at(
                    "S0210",
                    pos,
                    "Each step can only have one grouping expression",
                ));
            }
            let mut out = Vec::new();
            for (k, v) in pairs {
                out.push((self.process(k)?, self.process(v)?));
            }
            result.group = Some(out);
            result
        })
    }

    #[inline(never)]
    fn arm_sort_raw(
        &mut self,
        l: Box<Node>,
        terms: Vec<SortTerm>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let mut result = self.process(*l)?;
            if !matches!(result.kind, Kind::Path(_)) {
                let mut p = Node::new(Kind::Path(Vec::new()), pos);
                p.seeking_parent = std::mem::take(&mut result.seeking_parent);
                if let Kind::Path(steps) = &mut p.kind {
                    steps.push(result);
                }
                result = p;
            }
            let mut sort_step = Node::new(Kind::Sort(Vec::new()), pos);
            let mut out = Vec::new();
            for t in terms {
                let e = self.process(t.expr)?;
                push_ancestry(&mut sort_step, &e);
                out.push(SortTerm {
                    descending: t.descending,
                    expr: e,
                });
            }
            sort_step.kind = Kind::Sort(out);
            if let Kind::Path(steps) = &mut result.kind {
                steps.push(sort_step);
            }
            self.resolve_ancestry(&mut result)?;
            result
        })
    }

    #[inline(never)]
    fn arm_focus_bind(
        &mut self,
        l: Box<Node>,
        var: Arc<str>,
        pos: usize,
        keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let mut result = self.process(*l)?;
            let step: &mut Node = match &mut result.kind {
                Kind::Path(steps) if !steps.is_empty() => match steps.last_mut() {
                    Some(s) => s,
                    None => return Err(Error::at("S0201", pos, "Syntax error")),
                },
                _ => &mut result,
            };
            if !step.stages.is_empty() || !step.predicate.is_empty() {
                return Err(Error::at(
                    "S0215",
                    pos,
                    "A context variable binding must precede any predicates on a step",
                ));
            }
            if matches!(step.kind, Kind::Sort(_)) {
                return Err(Error::at(
                    "S0216",
                    pos,
                    "A context variable binding must precede the 'order-by' clause on a step",
                ));
            }
            if keep_array {
                step.keep_array = true;
            }
            step.focus = Some(var);
            step.tuple = true;
            result
        })
    }

    #[inline(never)]
    fn arm_index_bind(
        &mut self,
        l: Box<Node>,
        var: Arc<str>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let mut result = self.process(*l)?;
            if !matches!(result.kind, Kind::Path(_)) {
                if !result.predicate.is_empty() {
                    result.stages = std::mem::take(&mut result.predicate);
                }
                let mut p = Node::new(Kind::Path(Vec::new()), pos);
                p.seeking_parent = std::mem::take(&mut result.seeking_parent);
                if let Kind::Path(steps) = &mut p.kind {
                    steps.push(result);
                }
                result = p;
            }
            if let Kind::Path(steps) = &mut result.kind
                && let Some(step) = steps.last_mut()
            {
                if step.stages.is_empty() {
                    step.index = Some(var);
                } else {
                    step.stages.push(Stage::Index(var));
                }
                step.tuple = true;
            }
            result
        })
    }

    #[inline(never)]
    fn arm_binary(
        &mut self,
        op: BinOp,
        l: Box<Node>,
        r: Box<Node>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let l = self.process(*l)?;
            let r = self.process(*r)?;
            let mut n = Node::new(Kind::Placeholder, pos);
            push_ancestry(&mut n, &l);
            push_ancestry(&mut n, &r);
            n.kind = Kind::Binary(op, Box::new(l), Box::new(r));
            n
        })
    }

    #[inline(never)]
    fn arm_apply(
        &mut self,
        l: Box<Node>,
        r: Box<Node>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let l = self.process(*l)?;
            let r = self.process(*r)?;
            let mut n = Node::new(Kind::Placeholder, pos);
            push_ancestry(&mut n, &l);
            push_ancestry(&mut n, &r);
            // `x ~> $f()[]`: keep-array on the applied call applies to the result
            n.keep_array = l.keep_array || r.keep_array;
            n.kind = Kind::Apply(Box::new(l), Box::new(r));
            n
        })
    }

    #[inline(never)]
    fn arm_bind(
        &mut self,
        name: Arc<str>,
        r: Box<Node>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let r = self.process(*r)?;
            let mut n = Node::new(Kind::Placeholder, pos);
            push_ancestry(&mut n, &r);
            n.kind = Kind::Bind(name, Box::new(r));
            n
        })
    }

    #[inline(never)]
    fn arm_neg(&mut self, e: Box<Node>, pos: usize, _keep_array: bool) -> Result<Node> {
        Ok({
            let e = self.process(*e)?;
            match e.kind {
                Kind::Num(v) if e.predicate.is_empty() && e.group.is_none() => {
                    Node::new(Kind::Num(-v), pos)
                }
                _ => {
                    let mut n = Node::new(Kind::Placeholder, pos);
                    push_ancestry(&mut n, &e);
                    n.kind = Kind::Neg(Box::new(e));
                    n
                }
            }
        })
    }

    #[inline(never)]
    fn arm_array(&mut self, items: Vec<Node>, pos: usize, _keep_array: bool) -> Result<Node> {
        Ok({
            let mut n = Node::new(Kind::Placeholder, pos);
            let mut out = Vec::new();
            for i in items {
                let i = self.process(i)?;
                push_ancestry(&mut n, &i);
                out.push(i);
            }
            n.kind = Kind::Array(out);
            n
        })
    }

    #[inline(never)]
    fn arm_object(
        &mut self,
        pairs: Vec<(Node, Node)>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let mut n = Node::new(Kind::Placeholder, pos);
            let mut out = Vec::new();
            for (k, v) in pairs {
                let k = self.process(k)?;
                let v = self.process(v)?;
                push_ancestry(&mut n, &k);
                push_ancestry(&mut n, &v);
                out.push((k, v));
            }
            n.kind = Kind::Object(out);
            n
        })
    }

    #[inline(never)]
    fn arm_block(&mut self, items: Vec<Node>, pos: usize, _keep_array: bool) -> Result<Node> {
        Ok({
            let mut n = Node::new(Kind::Placeholder, pos);
            let mut out = Vec::new();
            for i in items {
                let i = self.process(i)?;
                push_ancestry(&mut n, &i);
                if i.cons_array
                    || matches!(&i.kind, Kind::Path(s) if s.first().is_some_and(|f| f.cons_array))
                {
                    n.cons_array = true;
                }
                out.push(i);
            }
            n.kind = Kind::Block(out);
            n
        })
    }

    #[inline(never)]
    fn arm_condition(
        &mut self,
        c: Box<Node>,
        t: Box<Node>,
        e: Option<Box<Node>>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let mut n = Node::new(Kind::Placeholder, pos);
            let c = self.process(*c)?;
            let t = self.process(*t)?;
            push_ancestry(&mut n, &c);
            push_ancestry(&mut n, &t);
            let e = match e {
                Some(e) => {
                    let e = self.process(*e)?;
                    push_ancestry(&mut n, &e);
                    Some(Box::new(e))
                }
                None => None,
            };
            n.kind = Kind::Condition(Box::new(c), Box::new(t), e);
            n
        })
    }

    #[inline(never)]
    fn arm_call(
        &mut self,
        p: Box<Node>,
        args: Vec<Node>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let (p, args, n) = self.process_call(*p, args, pos)?;
            let mut n = n;
            n.kind = Kind::Call(Box::new(p), args);
            n
        })
    }

    #[inline(never)]
    fn arm_partial(
        &mut self,
        p: Box<Node>,
        args: Vec<Node>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let (p, args, n) = self.process_call(*p, args, pos)?;
            let mut n = n;
            n.kind = Kind::Partial(Box::new(p), args);
            n
        })
    }

    #[inline(never)]
    fn arm_lambda(&mut self, def: Arc<LambdaDef>, pos: usize, _keep_array: bool) -> Result<Node> {
        Ok({
            let def = match Arc::try_unwrap(def) {
                Ok(d) => d,
                Err(_) => return Err(Error::at("S0201", pos, "Syntax error")),
            };
            let body = self.process(def.body)?;
            let body = tail_call_optimize(body);
            Node::new(
                Kind::Lambda(Arc::new(LambdaDef {
                    params: def.params,
                    signature: def.signature,
                    body,
                })),
                pos,
            )
        })
    }

    #[inline(never)]
    fn arm_transform(
        &mut self,
        def: Arc<TransformDef>,
        pos: usize,
        _keep_array: bool,
    ) -> Result<Node> {
        Ok({
            let def = match Arc::try_unwrap(def) {
                Ok(d) => d,
                Err(_) => return Err(Error::at("S0201", pos, "Syntax error")),
            };
            let pattern = self.process(def.pattern)?;
            let update = self.process(def.update)?;
            let delete = match def.delete {
                Some(d) => Some(self.process(d)?),
                None => None,
            };
            Node::new(
                Kind::Transform(Arc::new(TransformDef {
                    pattern,
                    update,
                    delete,
                })),
                pos,
            )
        })
    }

    fn process_call(
        &mut self,
        p: Node,
        args: Vec<Node>,
        pos: usize,
    ) -> Result<(Node, Vec<Node>, Node)> {
        let mut n = Node::new(Kind::Placeholder, pos);
        let mut out = Vec::new();
        for a in args {
            let a = self.process(a)?;
            push_ancestry(&mut n, &a);
            out.push(a);
        }
        let p = self.process(p)?;
        Ok((p, out, n))
    }

    fn resolve_ancestry(&mut self, path: &mut Node) -> Result<()> {
        let Kind::Path(steps) = &mut path.kind else {
            return Ok(());
        };
        let Some(last) = steps.last() else {
            return Ok(());
        };
        let mut slots = last.seeking_parent.clone();
        if let Kind::Parent(s) = last.kind {
            slots.push(s);
        }
        for slot in slots {
            let mut index = steps.len() as isize - 2;
            while self.slots.get(slot).is_some_and(|s| s.level > 0) {
                if index < 0 {
                    path.seeking_parent.push(slot);
                    break;
                }
                let mut i = index as usize;
                index -= 1;
                // contiguous steps that bind the focus are skipped together
                while index >= 0
                    && steps.get(i).is_some_and(|s| s.focus.is_some())
                    && steps.get(index as usize).is_some_and(|s| s.focus.is_some())
                {
                    i = index as usize;
                    index -= 1;
                }
                if let Some(step) = steps.get_mut(i) {
                    self.seek_parent(step, slot)?;
                }
            }
        }
        Ok(())
    }

    fn seek_parent(&mut self, node: &mut Node, slot: usize) -> Result<()> {
        match &mut node.kind {
            Kind::Name(_) | Kind::Wildcard => {
                let Some(s) = self.slots.get_mut(slot) else {
                    return Ok(());
                };
                s.level -= 1;
                if s.level == 0 {
                    match node.ancestor {
                        None => node.ancestor = Some(slot),
                        Some(existing) => {
                            // reuse the label already bound by this step
                            let label = self
                                .slots
                                .get(existing)
                                .map(|e| e.label)
                                .unwrap_or(existing);
                            if let Some(s) = self.slots.get_mut(slot) {
                                s.label = label;
                            }
                            node.ancestor = Some(slot);
                        }
                    }
                    node.tuple = true;
                }
            }
            Kind::Parent(_) => {
                if let Some(s) = self.slots.get_mut(slot) {
                    s.level += 1;
                }
            }
            Kind::Block(items) => {
                if let Some(last) = items.last_mut() {
                    node.tuple = true;
                    self.seek_parent(last, slot)?;
                }
            }
            Kind::Path(steps) => {
                node.tuple = true;
                let mut index = steps.len() as isize - 1;
                if let Some(s) = steps.get_mut(index as usize) {
                    self.seek_parent(s, slot)?;
                }
                index -= 1;
                while self.slots.get(slot).is_some_and(|s| s.level > 0) && index >= 0 {
                    if let Some(s) = steps.get_mut(index as usize) {
                        self.seek_parent(s, slot)?;
                    }
                    index -= 1;
                }
            }
            _ => {
                return Err(Error::at(
                    "S0217",
                    node.pos,
                    "The object representing the 'parent' cannot be derived from this expression",
                ));
            }
        }
        Ok(())
    }

    fn assign_labels(&self, node: &mut Node) {
        if let Kind::Parent(slot) = node.kind {
            let l = self.slots.get(slot).map(|s| s.label).unwrap_or(slot);
            node.label = Some(Arc::from(format!("!{l}")));
        }
        if let Some(slot) = node.ancestor {
            let l = self.slots.get(slot).map(|s| s.label).unwrap_or(slot);
            node.label = Some(Arc::from(format!("!{l}")));
        }
        node.for_each_child_mut(&mut |c| self.assign_labels(c));
    }
}

fn is_cons(n: &Node) -> bool {
    matches!(n.kind, Kind::Array(_))
}

fn mark_keep_array(n: &mut Node) {
    match &mut n.kind {
        Kind::Pred(l, _) => mark_keep_array(l),
        _ => n.keep_array = true,
    }
}

fn push_ancestry(result: &mut Node, value: &Node) {
    result
        .seeking_parent
        .extend(value.seeking_parent.iter().copied());
    if let Kind::Parent(s) = value.kind {
        result.seeking_parent.push(s);
    }
}

fn tail_call_optimize(n: Node) -> Node {
    let mut n = n;
    match &mut n.kind {
        Kind::Call(..) if n.predicate.is_empty() && n.group.is_none() => {
            let pos = n.pos;
            Node::new(Kind::Thunk(Arc::new(n)), pos)
        }
        Kind::Condition(_, t, e) => {
            let tt = std::mem::replace(&mut **t, Node::new(Kind::Null, 0));
            **t = tail_call_optimize(tt);
            if let Some(e) = e {
                let ee = std::mem::replace(&mut **e, Node::new(Kind::Null, 0));
                **e = tail_call_optimize(ee);
            }
            n
        }
        Kind::Block(items) => {
            if let Some(last) = items.pop() {
                items.push(tail_call_optimize(last));
            }
            n
        }
        _ => n,
    }
}
