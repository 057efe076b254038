//! Reading the documentation as the drift tests need it: the markdown files of `docs/` (and the
//! README), their fenced code blocks with the line each starts on, their links, their headings as
//! mdBook names them, and the page order of `docs/SUMMARY.md`.
//!
//! A small reader of our own markdown, not a full CommonMark parser: fences are lines starting with
//! three backticks, links are `[text](target)` outside code.

use std::path::{Path, PathBuf};

/// The repository root (this package lives in `tests/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The book's source folder.
pub fn docs_dir() -> PathBuf {
    repo_root().join("docs")
}

/// Every markdown file under `docs/`, sorted, then the README, the changelog and the agent skill.
pub fn markdown_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect_markdown(&docs_dir(), &mut files);
    files.sort();
    let root = repo_root();
    files.extend(["README.md", "CHANGELOG.md", "skills/queuebox/SKILL.md"].map(|f| root.join(f)));
    files
}

fn collect_markdown(dir: &Path, into: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_markdown(&path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
}

/// A file's text; a missing file fails the test naming it.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `path` relative to the repository root, for messages.
pub fn shown(path: &Path) -> String {
    path.strip_prefix(repo_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// One fenced code block.
#[derive(Debug, Clone)]
pub struct CodeBlock {
    /// The line of the opening fence (1-based).
    pub line: usize,
    /// The info string after the fence, such as `sql` or `yaml,fragment`.
    pub info: String,
    pub body: String,
}

impl CodeBlock {
    /// The language: the info string up to the first comma or space.
    pub fn language(&self) -> &str {
        self.info.split([',', ' ']).next().unwrap_or_default()
    }

    /// Whether the info string carries `flag` after the language (`sql,ignore` has `ignore`).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.info.split([',', ' ']).skip(1).any(|f| f == flag)
    }
}

/// The fenced code blocks of `text`, in order.
pub fn code_blocks(text: &str) -> Vec<CodeBlock> {
    let mut blocks = Vec::new();
    let mut open: Option<CodeBlock> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match (&mut open, trimmed.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(CodeBlock {
                    line: index + 1,
                    info: info.trim().to_owned(),
                    body: String::new(),
                });
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => {
                blocks.extend(open.take());
            }
            (Some(block), _) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// One link of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub line: usize,
    pub target: String,
}

/// The `[text](target)` links of `text` outside fenced blocks and inline code.
pub fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    let mut in_fence = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut in_code = false;
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'`' => in_code = !in_code,
                b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                    if let Some(end) = line[i + 2..].find(')') {
                        let target = line[i + 2..i + 2 + end].trim();
                        // A title after the target (`(url "title")`) is not part of it.
                        let target = target.split_whitespace().next().unwrap_or_default();
                        found.push(Link {
                            line: index + 1,
                            target: target.to_owned(),
                        });
                        i += 2 + end;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    found
}

/// The ids mdBook gives the headings of `text`: lower case, spaces to `-`, only letters, digits,
/// `-` and `_` kept; a repeated id gets `-1`, `-2`, ... as mdBook numbers them.
pub fn heading_ids(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let base = heading_id(title);
        let repeats = ids
            .iter()
            .filter(|id| {
                **id == base
                    || id
                        .strip_prefix(&format!("{base}-"))
                        .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count();
        ids.push(if repeats == 0 {
            base
        } else {
            format!("{base}-{repeats}")
        });
    }
    ids
}

/// mdBook's id of one heading's text (inline code marks and link syntax dropped first).
pub fn heading_id(title: &str) -> String {
    let plain: String = title.replace('`', "");
    plain
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// One entry of `docs/SUMMARY.md`: its title, its file under `docs/`, and the part it is listed
/// under (`None` before the first part heading).
#[derive(Debug, Clone)]
pub struct SummaryEntry {
    pub part: Option<String>,
    pub title: String,
    pub file: String,
}

/// The pages of `docs/SUMMARY.md` in book order.
pub fn summary() -> Vec<SummaryEntry> {
    let text = read(&docs_dir().join("SUMMARY.md"));
    let mut part = None;
    let mut entries = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(title) = trimmed.strip_prefix("# ") {
            if title != "Summary" {
                part = Some(title.to_owned());
            }
            continue;
        }
        let item = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        let Some(rest) = item.strip_prefix('[') else {
            continue;
        };
        let Some((title, rest)) = rest.split_once("](") else {
            continue;
        };
        let Some((file, _)) = rest.split_once(')') else {
            continue;
        };
        entries.push(SummaryEntry {
            part: part.clone(),
            title: title.to_owned(),
            file: file.to_owned(),
        });
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_info_and_first_line() {
        let text = "a\n```sql,ignore\nSELECT 1;\n```\n```yaml\nx: 1\n```\n";
        let blocks = code_blocks(text);
        assert_eq!(blocks.len(), 2);
        assert_eq!((blocks[0].line, blocks[0].language()), (2, "sql"));
        assert!(blocks[0].has_flag("ignore"));
        assert_eq!(blocks[1].body, "x: 1\n");
        assert!(!blocks[1].has_flag("ignore"));
    }

    #[test]
    fn links_outside_code_only() {
        let text = "see [a](x.md#b) and `[c](d)`\n```\n[e](f)\n```\n[g](h \"t\")\n";
        let targets: Vec<String> = links(text).into_iter().map(|l| l.target).collect();
        assert_eq!(targets, ["x.md#b", "h"]);
    }

    #[test]
    fn heading_ids_follow_mdbook() {
        let text = "# The `outbox` table\n## Hello, World!\n## Hello, World!\n```\n# not\n```\n";
        assert_eq!(
            heading_ids(text),
            ["the-outbox-table", "hello-world", "hello-world-1"]
        );
    }
}
