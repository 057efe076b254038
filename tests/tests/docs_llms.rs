//! `llms.txt` and `llms-full.txt` at the repository root are made from `docs/`, and this test fails
//! when either is stale. To write them anew after changing the docs:
//!
//! ```text
//! QB_UPDATE_LLMS=1 cargo test -p queuebox-tests --test docs_llms
//! ```
//!
//! `llms.txt` follows the llmstxt.org shape: a title, a one-paragraph summary, then one section per
//! part of the book with a link and a one-sentence description per page. `llms-full.txt` is every
//! page in book order, each introduced by a comment line naming its file.

use queuebox_tests::docs::{docs_dir, read, repo_root, summary};

const SUMMARY_LINE: &str = "QueueBox is a self-hosted transactional outbox and idempotent inbox in one \
process: applications insert rows into an `outbox` table inside their own transactions and QueueBox \
delivers them in order per key to HTTP, RabbitMQ, Kafka and NATS JetStream; webhooks and broker \
messages are stored once per source and idempotency key in an `inbox` table.";

/// The first sentence of a page's first paragraph (the text after its title), on one line.
fn description(page: &str) -> String {
    let mut paragraph = Vec::new();
    let mut in_fence = false;
    for line in page.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let list_item = trimmed.starts_with("- ")
            || trimmed.starts_with("* ")
            || trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let prose = !in_fence
            && !trimmed.is_empty()
            && !list_item
            && !trimmed.starts_with(['#', '|', '>', '<', '!']);
        if prose {
            paragraph.push(trimmed);
        } else if !paragraph.is_empty() {
            break;
        }
    }
    let text = without_links(&paragraph.join(" "));
    match text.find(". ") {
        Some(end) => text[..=end].to_owned(),
        None => text,
    }
}

/// `text` with each `[label](target)` replaced by its label: a page's relative targets mean
/// nothing at the root.
fn without_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some((label, tail)) = after.split_once("](") else {
            break;
        };
        let Some(close) = tail.find(')') else { break };
        out.push_str(&rest[..open]);
        out.push_str(label);
        rest = &tail[close + 1..];
    }
    out.push_str(rest);
    out
}

fn llms_index() -> String {
    let mut out = format!("# QueueBox\n\n> {SUMMARY_LINE}\n\n");
    out.push_str(
        "The documentation is an mdBook in `docs/`; `llms-full.txt` holds every page in one file. \
         Status of each feature: `features.md`. Changes per version: `CHANGELOG.md`.\n",
    );
    // `None` until the first entry: every change of part, the first included, opens a section.
    let mut current: Option<Option<String>> = None;
    for entry in summary() {
        if current.as_ref() != Some(&entry.part) {
            let title = entry.part.as_deref().unwrap_or("Overview");
            out.push_str(&format!("\n## {title}\n\n"));
            current = Some(entry.part.clone());
        }
        let page = read(&docs_dir().join(&entry.file));
        let about = description(&page);
        let link = format!("- [{}](docs/{})", entry.title, entry.file);
        if about.is_empty() {
            out.push_str(&format!("{link}\n"));
        } else {
            out.push_str(&format!("{link}: {about}\n"));
        }
    }
    out
}

fn llms_full() -> String {
    let mut out =
        format!("# QueueBox documentation, every page in book order\n\n> {SUMMARY_LINE}\n");
    for entry in summary() {
        let page = read(&docs_dir().join(&entry.file));
        out.push_str(&format!(
            "\n<!-- docs/{} -->\n\n{}",
            entry.file,
            page.trim_end()
        ));
        out.push('\n');
    }
    out
}

#[test]
fn llms_files_match_the_docs() {
    let wanted = [("llms.txt", llms_index()), ("llms-full.txt", llms_full())];
    let update = std::env::var_os("QB_UPDATE_LLMS").is_some();
    let mut stale = Vec::new();
    for (name, text) in &wanted {
        let path = repo_root().join(name);
        if update {
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {name}: {e}"));
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(*name);
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} no longer match docs/: run `QB_UPDATE_LLMS=1 cargo test -p queuebox-tests --test docs_llms` and commit the result"
    );
}

#[test]
fn a_description_is_the_first_sentence_after_the_title() {
    let page = "# Title\n\nQueueBox does one thing. Then more.\n\n## Next\n";
    assert_eq!(description(page), "QueueBox does one thing.");
    assert_eq!(
        description("# T\n\n| a |\n\nText with **bold**\n**words** and [a link](x.md)\n"),
        "Text with **bold** **words** and a link"
    );
    assert_eq!(
        description("# T\n\n1. a step\n\n2026 was a year. More.\n"),
        "2026 was a year."
    );
}
