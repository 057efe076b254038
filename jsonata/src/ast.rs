//! The processed syntax tree the evaluator walks. Paths are flattened into
//! step lists, predicates are attached to the step they filter, and parent
//! (`%`) references are resolved to ancestor labels at compile time.

use crate::regex::JRegex;
use crate::signature::Signature;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Concat,
    And,
    Or,
    In,
    Range,
    Coalesce,
    Elvis,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Eq => "=",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Concat => "&",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::In => "in",
            BinOp::Range => "..",
            BinOp::Coalesce => "??",
            BinOp::Elvis => "?:",
        }
    }
}

#[derive(Debug)]
pub(crate) enum Stage {
    Filter(Box<Node>),
    Index(Arc<str>),
}

#[derive(Debug)]
pub(crate) struct SortTerm {
    pub descending: bool,
    pub expr: Node,
}

#[derive(Debug)]
pub(crate) struct LambdaDef {
    pub params: Vec<Arc<str>>,
    pub signature: Option<Signature>,
    pub body: Node,
}

#[derive(Debug)]
pub(crate) struct TransformDef {
    pub pattern: Node,
    pub update: Node,
    pub delete: Option<Node>,
}

#[derive(Debug)]
pub(crate) enum Kind {
    Path(Vec<Node>),
    Name(Arc<str>),
    Str(Arc<str>),
    Num(f64),
    Bool(bool),
    Null,
    Wildcard,
    Descendant,
    /// `%`: slot id during compilation; resolved to `label`.
    Parent(usize),
    Variable(Arc<str>),
    Regex(Arc<JRegex>),
    Binary(BinOp, Box<Node>, Box<Node>),
    Neg(Box<Node>),
    Array(Vec<Node>),
    Object(Vec<(Node, Node)>),
    Block(Vec<Node>),
    Condition(Box<Node>, Box<Node>, Option<Box<Node>>),
    Bind(Arc<str>, Box<Node>),
    Call(Box<Node>, Vec<Node>),
    Partial(Box<Node>, Vec<Node>),
    Placeholder,
    Lambda(Arc<LambdaDef>),
    /// A call in tail position: evaluates to a thunk for the trampoline.
    Thunk(Arc<Node>),
    Apply(Box<Node>, Box<Node>),
    Transform(Arc<TransformDef>),
    Sort(Vec<SortTerm>),
    // Raw forms produced by the parser and rewritten by `process`.
    Dot(Box<Node>, Box<Node>),
    Pred(Box<Node>, Box<Node>),
    GroupBy(Box<Node>, Vec<(Node, Node)>),
    SortRaw(Box<Node>, Vec<SortTerm>),
    FocusBind(Box<Node>, Arc<str>),
    IndexBind(Box<Node>, Arc<str>),
}

#[derive(Debug)]
pub(crate) struct Node {
    pub kind: Kind,
    pub pos: usize,
    /// Filters applied per input item when this node is a path step.
    pub stages: Vec<Stage>,
    /// Filters applied to this node's result when it is not a path step.
    pub predicate: Vec<Stage>,
    pub group: Option<Vec<(Node, Node)>>,
    pub focus: Option<Arc<str>>,
    pub index: Option<Arc<str>>,
    pub tuple: bool,
    /// Ancestor slot bound by this step (compile time), and its label.
    pub ancestor: Option<usize>,
    pub label: Option<Arc<str>>,
    pub keep_array: bool,
    pub cons_array: bool,
    pub keep_singleton: bool,
    pub seeking_parent: Vec<usize>,
    /// Height of the subtree, computed while parsing to bound nesting.
    pub depth_cache: usize,
}

impl Node {
    /// A placeholder node usable in statics.
    pub const fn empty() -> Node {
        Node {
            kind: Kind::Null,
            pos: 0,
            stages: Vec::new(),
            predicate: Vec::new(),
            group: None,
            focus: None,
            index: None,
            tuple: false,
            ancestor: None,
            label: None,
            keep_array: false,
            cons_array: false,
            keep_singleton: false,
            seeking_parent: Vec::new(),
            depth_cache: 1,
        }
    }

    pub fn new(kind: Kind, pos: usize) -> Node {
        Node {
            kind,
            pos,
            stages: Vec::new(),
            predicate: Vec::new(),
            group: None,
            focus: None,
            index: None,
            tuple: false,
            ancestor: None,
            label: None,
            keep_array: false,
            cons_array: false,
            keep_singleton: false,
            seeking_parent: Vec::new(),
            depth_cache: 1,
        }
    }

    /// Visit every direct child node mutably (used by compile-time passes).
    pub fn for_each_child_mut(&mut self, f: &mut dyn FnMut(&mut Node)) {
        for s in self.stages.iter_mut().chain(self.predicate.iter_mut()) {
            if let Stage::Filter(n) = s {
                f(n);
            }
        }
        if let Some(g) = self.group.as_mut() {
            for (k, v) in g.iter_mut() {
                f(k);
                f(v);
            }
        }
        match &mut self.kind {
            Kind::Path(v) | Kind::Array(v) | Kind::Block(v) => v.iter_mut().for_each(f),
            Kind::Binary(_, a, b) | Kind::Apply(a, b) | Kind::Dot(a, b) | Kind::Pred(a, b) => {
                f(a);
                f(b);
            }
            Kind::Neg(a) | Kind::Bind(_, a) | Kind::FocusBind(a, _) | Kind::IndexBind(a, _) => f(a),
            Kind::Object(pairs) => {
                for (k, v) in pairs.iter_mut() {
                    f(k);
                    f(v);
                }
            }
            Kind::GroupBy(a, pairs) => {
                f(a);
                for (k, v) in pairs.iter_mut() {
                    f(k);
                    f(v);
                }
            }
            Kind::Condition(c, t, e) => {
                f(c);
                f(t);
                if let Some(e) = e {
                    f(e);
                }
            }
            Kind::Call(p, args) | Kind::Partial(p, args) => {
                f(p);
                args.iter_mut().for_each(f);
            }
            Kind::Lambda(def) => {
                if let Some(d) = Arc::get_mut(def) {
                    f(&mut d.body);
                }
            }
            Kind::Thunk(n) => {
                if let Some(n) = Arc::get_mut(n) {
                    f(n);
                }
            }
            Kind::Transform(t) => {
                if let Some(t) = Arc::get_mut(t) {
                    f(&mut t.pattern);
                    f(&mut t.update);
                    if let Some(d) = t.delete.as_mut() {
                        f(d);
                    }
                }
            }
            Kind::Sort(terms) => terms.iter_mut().for_each(|t| f(&mut t.expr)),
            Kind::SortRaw(a, terms) => {
                f(a);
                terms.iter_mut().for_each(|t| f(&mut t.expr));
            }
            _ => {}
        }
    }
}
