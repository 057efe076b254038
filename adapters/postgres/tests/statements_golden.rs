//! Golden snapshot of every rendered statement for the documentation's renamed mapping.
//!
//! A change to a query template changes `golden/statements_renamed.sql`; review the diff and
//! regenerate it with `QB_UPDATE_GOLDEN=1 cargo test -p queuebox-postgres --test statements_golden`.

mod common;

use queuebox_domain::mapping::SchemaNames;
use queuebox_postgres::{Statements, has_placeholder};

const GOLDEN: &str = "tests/golden/statements_renamed.sql";

fn render_all(names: &SchemaNames) -> String {
    let statements = Statements::render(names).expect("render");
    let mut out = String::new();
    for (name, sql) in statements.iter() {
        out.push_str(&format!("-- {name}\n{sql};\n\n"));
    }
    out
}

#[test]
fn rendered_statements_match_the_golden_file() {
    let rendered = render_all(&common::renamed_schema());
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var_os("QB_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &rendered).expect("write the golden file");
    }
    let golden = std::fs::read_to_string(&path).expect("read the golden file");
    assert_eq!(
        rendered, golden,
        "rendered statements differ from {GOLDEN}; if the change is intended, regenerate it"
    );
}

#[test]
fn no_placeholder_survives_rendering() {
    for names in [SchemaNames::default(), common::renamed_schema()] {
        let statements = Statements::render(&names).expect("render");
        let mut count = 0;
        for (name, sql) in statements.iter() {
            assert!(!has_placeholder(sql), "{name}: {sql}");
            count += 1;
        }
        assert_eq!(count, 25);
    }
}

#[test]
fn the_renamed_mapping_reaches_the_statements() {
    let rendered = render_all(&common::renamed_schema());
    for expected in [
        r#""qb_outbox""#,
        r#""qb_inbox""#,
        r#""body""#,
        r#""dedup_key""#,
    ] {
        assert!(rendered.contains(expected), "{expected} missing");
    }
    for default in [r#""outbox""#, r#""inbox""#, r#""idempotency_key""#] {
        assert!(!rendered.contains(default), "{default} still present");
    }
}
