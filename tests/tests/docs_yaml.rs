//! Every ```yaml block of the documentation passes `queuebox check-config`.
//!
//! The pages show configuration a reader copies into `queuebox.yml`; this test keeps each block
//! loadable by the real binary as the code changes. It reads `README.md` and every `docs/**/*.md`
//! file and takes each fenced block whose language is `yaml`:
//!
//! - ```yaml: a whole file, checked as is;
//! - ```yaml,fragment: a part of a file, laid over [`MINIMAL`] first (blocks merge key by key, any
//!   other value replaces), so a page can show only the keys it is about;
//! - ```yaml,ignore: skipped; only for deliberately invalid examples.
//!
//! So that examples can be written as a deployment would write them, two things are filled in
//! before the check: a `${NAME}` placeholder without a fallback gets a value (`NAME` is set for the
//! run), and a `file:` secret reference is pointed at a temporary file holding a dummy secret.
//!
//! A block fails when `check-config` exits non-zero or warns about an unknown key. The failure
//! names the file and line of every failing block at once, with the binary's message.

use queuebox_tests::docs::{code_blocks, markdown_files, read, shown};
use queuebox_tests::process::Launch;
use serde_yaml::Value;
use std::time::Duration;

/// The smallest file that loads; a fragment is laid over it.
const MINIMAL: &str = "
database:
  url: jdbc:postgresql://localhost:5432/queuebox
  username: queuebox
  password: queuebox
";

/// Lays `top` over `base`: mappings merge key by key, anything else replaces.
fn merge(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Mapping(base), Value::Mapping(top)) => {
            for (key, value) in top {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, top) => *slot = top,
    }
}

/// The names of the `${NAME}` placeholders of `text` that have no fallback.
fn unset_placeholders(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let inner = &rest[start + 2..];
        let Some(end) = inner.find('}') else { break };
        let body = &inner[..end];
        if !body.contains(":-") && !body.is_empty() {
            names.push(body.to_owned());
        }
        rest = &inner[end + 1..];
    }
    names
}

/// Points every `file:` reference of `text` at `secret`.
fn redirect_secret_files(text: &str, secret: &str) -> String {
    text.lines()
        .map(|line| {
            let Some(at) = line.find("file:") else {
                return line.to_owned();
            };
            let before = &line[..at];
            // A value that starts with `file:`, quoted or not, right after a key's colon.
            let quote = before.chars().last().filter(|c| *c == '"' || *c == '\'');
            let key_part = before.trim_end_matches(['"', '\'']).trim_end();
            if !key_part.ends_with(':') {
                return line.to_owned();
            }
            let close = quote.map(String::from).unwrap_or_default();
            format!("{before}file:{secret}{close}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The file `check-config` reads for a block, or why it cannot be built.
fn config_text(body: &str, fragment: bool) -> Result<String, String> {
    if !fragment {
        return Ok(body.to_owned());
    }
    let top: Value =
        serde_yaml::from_str(body).map_err(|e| format!("the fragment is not YAML: {e}"))?;
    if !matches!(top, Value::Mapping(_)) {
        return Err("a fragment must be a block of keys".to_owned());
    }
    let mut base: Value = serde_yaml::from_str(MINIMAL).expect("MINIMAL is YAML");
    merge(&mut base, top);
    serde_yaml::to_string(&base).map_err(|e| format!("cannot write the merged file: {e}"))
}

async fn check(body: &str, fragment: bool) -> Result<(), String> {
    let mut launch = Launch::with_config("");
    let secret = launch.dir().join("secret");
    std::fs::write(&secret, "dummy-secret\n").expect("write the dummy secret");
    let body = redirect_secret_files(body, &secret.display().to_string());
    let text = config_text(&body, fragment)?;
    let file = launch.dir().join("block.yml");
    std::fs::write(&file, &text).expect("write the block");
    for name in unset_placeholders(&text) {
        launch = launch.env(&name, "placeholder-value");
    }
    let file_arg = file.display().to_string();
    let (status, _stdout, stderr) = launch
        .run(
            &["check-config", "--config", &file_arg],
            Duration::from_secs(30),
        )
        .await;
    let stderr = queuebox_tests::without_colours(&stderr);
    if !status.success() {
        return Err(stderr.trim().to_owned());
    }
    let unknown: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("unknown key"))
        .collect();
    if !unknown.is_empty() {
        return Err(unknown.join("\n"));
    }
    Ok(())
}

#[tokio::test]
async fn every_yaml_block_of_the_docs_passes_check_config() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in markdown_files() {
        let text = read(&path);
        for block in code_blocks(&text) {
            if !matches!(block.language(), "yaml" | "yml") || block.has_flag("ignore") {
                continue;
            }
            checked += 1;
            if let Err(message) = check(&block.body, block.has_flag("fragment")).await {
                let kind = if block.has_flag("fragment") {
                    "```yaml,fragment block (merged over a minimal file)"
                } else {
                    "```yaml block"
                };
                failures.push(format!(
                    "{}:{}: the {kind} fails `queuebox check-config`:\n{}",
                    shown(&path),
                    block.line,
                    message
                        .lines()
                        .map(|l| format!("    {l}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
        }
    }
    assert!(checked > 0, "no ```yaml block found in the docs");
    assert!(
        failures.is_empty(),
        "{} of {checked} YAML blocks fail (mark a partial block ```yaml,fragment, a deliberately invalid one ```yaml,ignore):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn fragments_merge_over_the_minimal_file() {
    let text = config_text(
        "database:\n  poolSize: 3\nserver:\n  httpPort: 9000\n",
        true,
    )
    .expect("a fragment merges");
    let merged: Value = serde_yaml::from_str(&text).expect("merged YAML");
    assert_eq!(merged["database"]["poolSize"], Value::from(3));
    assert_eq!(merged["database"]["username"], Value::from("queuebox"));
    assert_eq!(merged["server"]["httpPort"], Value::from(9000));
}

#[test]
fn placeholders_and_secret_files_are_filled() {
    assert_eq!(
        unset_placeholders("a: ${A}\nb: ${B:-x}\nc: x${C}y"),
        ["A", "C"]
    );
    assert_eq!(
        redirect_secret_files(
            "  password: file:/run/secrets/db\n  x: \"file:/a\"",
            "/tmp/s"
        ),
        "  password: file:/tmp/s\n  x: \"file:/tmp/s\""
    );
}
