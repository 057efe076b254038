//! The public API contract: undefined vs null, key order, number output,
//! bindings, error codes and positions, reuse across threads.

use queuebox_jsonata::{Bindings, Expression, Limits};
use serde_json::{Value, json};
use std::sync::Arc;

fn eval(expr: &str, data: &Value) -> Result<Option<Value>, queuebox_jsonata::Error> {
    Expression::compile(expr)?.evaluate(data, &Bindings::new(), &Limits::default())
}

#[test]
fn undefined_is_not_null() {
    assert_eq!(eval("missing", &json!({"a": 1})), Ok(None));
    assert_eq!(eval("a", &json!({"a": null})), Ok(Some(Value::Null)));
}

#[test]
fn object_keys_keep_insertion_order() {
    let out = eval("{'z': 1, 'a': 2, 'm': 3}", &json!(null))
        .expect("eval")
        .expect("defined");
    let keys: Vec<&String> = out.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["z", "a", "m"]);
    let out = eval("$", &json!({"b": 1, "a": 2}))
        .expect("eval")
        .expect("defined");
    assert_eq!(
        serde_json::to_string(&out).expect("json"),
        r#"{"b":1,"a":2}"#
    );
}

#[test]
fn numbers_print_as_javascript_does() {
    let cases = [
        ("1 + 1", "2"),
        ("0.1 + 0.2", "0.30000000000000004"),
        ("$string(1e21)", "\"1e+21\""),
        ("$string(1/3)", "\"0.333333333333333\""),
        ("$string(100)", "\"100\""),
        ("$string(1.5e-7)", "\"1.5e-7\""),
        ("$string(123456789012)", "\"123456789012\""),
    ];
    for (e, want) in cases {
        let v = eval(e, &json!(null)).expect(e).expect("defined");
        assert_eq!(serde_json::to_string(&v).expect("json"), want, "{e}");
    }
}

#[test]
fn bindings_are_per_evaluation() {
    let expr =
        Expression::compile("$topic & ':' & $messageId & ':' & $headers.kind").expect("compile");
    let mut b = Bindings::new();
    b.insert("topic".into(), json!("orders"));
    b.insert("$messageId".into(), json!(42));
    b.insert("headers".into(), json!({"kind": "created"}));
    let out = expr
        .evaluate(&json!({}), &b, &Limits::default())
        .expect("eval");
    assert_eq!(out, Some(json!("orders:42:created")));
    let out = expr
        .evaluate(&json!({}), &Bindings::new(), &Limits::default())
        .expect("eval");
    assert_eq!(out, Some(json!("::")));
}

#[test]
fn errors_carry_codes_and_positions() {
    let e = Expression::compile("Account.(Order").expect_err("syntax");
    assert_eq!(e.code, "S0203");
    let e = Expression::compile("1 +* 2").expect_err("syntax");
    assert!(e.code.starts_with('S'), "{e}");
    assert!(e.position.is_some());
    let e = eval("'a' + 1", &json!(null)).expect_err("type");
    assert_eq!(e.code, "T2001");
    assert_eq!(e.position, Some(5));
    let e = eval("$number('x')", &json!(null)).expect_err("dynamic");
    assert_eq!(e.code, "D3030");
    assert!(!e.is_limit());
    assert!(e.to_string().contains("D3030"));
}

#[test]
fn now_is_fixed_within_one_evaluation() {
    let v = eval(
        "[1..2000].$millis() ~> $distinct() ~> $count()",
        &json!(null),
    )
    .expect("eval");
    assert_eq!(v, Some(json!(1)));
}

#[test]
fn compiled_expressions_are_shared_across_threads() {
    let expr = Arc::new(Expression::compile("$sum(items.price)").expect("compile"));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let expr = Arc::clone(&expr);
            std::thread::spawn(move || {
                let data = json!({"items": [{"price": i}, {"price": 1}]});
                expr.evaluate(&data, &Bindings::new(), &Limits::default())
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().expect("join"), Ok(Some(json!(i + 1))));
    }
}

#[test]
fn transform_and_closures() {
    let out = eval(
        "$ ~> |items|{'seen': true}, ['secret']|",
        &json!({"items": [{"a": 1, "secret": 2}]}),
    )
    .expect("eval");
    assert_eq!(out, Some(json!({"items": [{"a": 1, "seen": true}]})));
    let out = eval(
        "($add := function($x){ function($y){ $x + $y } }; $add(2)(3))",
        &json!(null),
    )
    .expect("eval");
    assert_eq!(out, Some(json!(5)));
}

#[test]
fn closures_survive_scope_release() {
    let cases = [
        (
            "($f := function($n, $g){ $n = 0 ? $g() : $f($n-1, function(){ $n }) }; $f(3, function(){ -1 }))",
            json!(1),
        ),
        (
            "($f := function($n){ $n = 0 ? 'x' : ($g := function($m){ $f($m) }; $g($n-1)) }; $f(5))",
            json!("x"),
        ),
        (
            "($f := function($n, $acc){ $n = 0 ? $acc : ($k := $n * 2; $f($n - 1, $acc + $k)) }; $f(100, 0))",
            json!(10100),
        ),
        ("($f := function($x){ $eval('$x + 1') }; $f(41))", json!(42)),
        (
            "($f := function($a, $b){ $a + $b }; $g := $f(?, 10); $map([1,2], $g))",
            json!([11, 12]),
        ),
        (
            "($t := function(){ |a|{'b': 1}| }; $tr := $t(); {'a': {}} ~> $tr)",
            json!({"a": {"b": 1}}),
        ),
        (
            "($f := function($n){ $n = 0 ? [] : $append($f($n - 1), function(){ $n }) }; $f(3).$())",
            json!([1, 2, 3]),
        ),
        (
            "($c := function($n){ $n <= 0 ? function(){ 'end' } : $c($n - 1) }; $c(100)())",
            json!("end"),
        ),
        (
            "($mk := function($k){ function($o){ $lookup($o, $k) } }; $a := $mk('a'); $b := $mk('b'); [$a({'a':1}), $b({'b':2})])",
            json!([1, 2]),
        ),
    ];
    for (e, want) in cases {
        assert_eq!(eval(e, &json!(null)), Ok(Some(want)), "{e}");
    }
}

fn eval_text(expr: &str, text: &str) -> Result<Option<String>, queuebox_jsonata::Error> {
    Expression::compile(expr)?.evaluate_json(text, &Bindings::new(), &Limits::default())
}

#[test]
fn json_text_in_and_out() {
    assert_eq!(
        eval_text("{'n': a, 'k': $keys($)}", r#"{"b":1,"a":2.5,"b":3}"#),
        Ok(Some(r#"{"n":2.5,"k":["b","a"]}"#.into()))
    );
    assert_eq!(eval_text("missing", "{}"), Ok(None));
    assert_eq!(eval_text("$", "null"), Ok(Some("null".into())));
    assert_eq!(eval_text("$ * 2", "1e3"), Ok(Some("2000".into())));
    assert_eq!(
        eval_text("[1, $string, 'x\"\\n']", "[]"),
        Ok(Some(r#"[1,"","x\"\n"]"#.into()))
    );
    for bad in ["", "{", "[1,]", "{} x", "nul"] {
        let e = eval_text("$", bad).expect_err(bad);
        assert_eq!(e.code, "J0001", "{bad}: {e}");
        assert!(!e.is_limit());
    }
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert_eq!(eval_text("$", &deep).map_err(|e| e.code), Err("J0001"));
    let small = Limits {
        max_output_bytes: 100,
        ..Limits::default()
    };
    let e = Expression::compile("$pad('', 200, 'x') ~> $uppercase()")
        .and_then(|x| x.evaluate_json("{}", &Bindings::new(), &small))
        .expect_err("too long");
    assert_eq!(e.code, "U1002");
    let e = Expression::compile("[1..20].('abcdefgh')")
        .and_then(|x| x.evaluate_json("{}", &Bindings::new(), &small))
        .expect_err("too long");
    assert_eq!(e.code, "U1002");
}

#[test]
fn transform_updates_only_what_the_pattern_matched() {
    // the same object bound twice: the copy made by the transform keeps the
    // two apart, so only the matched one changes
    let out = eval(
        "($o := {'v': 1}; {'p': $o, 'q': $o} ~> |p|{'v': 2, 'self': $}, ['x']|)",
        &json!(null),
    )
    .expect("eval")
    .expect("defined");
    assert_eq!(out, json!({"p": {"v": 2, "self": {"v": 1}}, "q": {"v": 1}}));
    // nested matches, updates and deletions; the input is left unchanged
    let data = json!({"a": [{"b": {"c": 1, "x": 0}}, {"b": {"c": 2}}], "x": 9});
    let out = eval("$ ~> |a.b|{'c': c * 10}, 'x'|", &data)
        .expect("eval")
        .expect("defined");
    assert_eq!(
        out,
        json!({"a": [{"b": {"c": 10}}, {"b": {"c": 20}}], "x": 9})
    );
    let out = eval("{'before': $, 'after': $ ~> |$|{}, ['x']|}", &data)
        .expect("eval")
        .expect("defined");
    assert_eq!(out["before"], data);
    assert_eq!(
        out["after"],
        json!({"a": [{"b": {"c": 1, "x": 0}}, {"b": {"c": 2}}]})
    );
}

#[test]
fn object_constructor_over_one_value() {
    assert_eq!(
        eval("{'a': x, 'b': y, 'c': missing}", &json!({"x": 1, "y": [2]})),
        Ok(Some(json!({"a": 1, "b": [2]})))
    );
    let e = eval("{'a': 1, 'a': 2}", &json!({})).expect_err("duplicate");
    assert_eq!(e.code, "D1009");
    // the duplicate is found before any value is evaluated
    let e = eval("{'a': $error('value'), 'a': 2}", &json!({})).expect_err("duplicate");
    assert_eq!(e.code, "D1009");
    let e = eval("{1: 2}", &json!({})).expect_err("key type");
    assert_eq!(e.code, "T1003");
    // many keys (a set is used past sixteen)
    let pairs: Vec<String> = (0..40).map(|i| format!("'k{i}': {i}")).collect();
    let out = eval(&format!("{{{}}}", pairs.join(", ")), &json!(null))
        .expect("eval")
        .expect("defined");
    assert_eq!(out.as_object().map(|m| m.len()), Some(40));
    let e = eval(&format!("{{{}, 'k3': 0}}", pairs.join(", ")), &json!(null)).expect_err("dup");
    assert_eq!(e.code, "D1009");
}

#[test]
fn regex_javascript_forms() {
    let yes = |e: &str| assert_eq!(eval(e, &json!(null)), Ok(Some(json!(true))), "{e}");
    let no = |e: &str| assert_eq!(eval(e, &json!(null)), Ok(Some(json!(false))), "{e}");
    yes(r"$contains('a\u0000b', /\0/)");
    no(r"$contains('a0b', /\0/)");
    yes(r"$contains('a\nb', /\cJ/)");
    yes(r"$contains('a\b', /[\b]/)");
    no(r"$contains('ab', /[\b]/)");
    yes("$contains('ab', /[^]/)");
    no("$contains('ab', /[]/)");
    no("$contains('a]', /[]]/)");
    yes("$contains('&', /[a&&b]/)");
    yes("$contains('b', /[a&&b]/)");
    no("$contains('c', /[a&&b]/)");
    yes("$contains('~', /[a~~b]/)");
    yes("$contains('x]', /[^a]]/)");
    yes(r"$contains('٣', /\D/)");
    for unsupported in [
        r"/(?=a)/",
        r"/(?<!a)b/",
        r"/(a)\1/",
        r"/(?<n>a)\k<n>/",
        "/a{/",
    ] {
        let e =
            Expression::compile(&format!("$contains('a', {unsupported})")).expect_err(unsupported);
        assert_eq!(e.code, "S0303", "{unsupported}");
    }
}
