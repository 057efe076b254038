//! The documentation holds together: every page of `docs/SUMMARY.md` exists and every markdown file
//! of `docs/` is in it, no page is still a stub, and every relative link of `docs/` and the README
//! reaches a file, and its `#anchor` a heading of that page (ids as mdBook makes them).

use queuebox_tests::docs::{
    docs_dir, heading_ids, links, markdown_files, read, repo_root, shown, summary,
};
use std::path::{Component, Path, PathBuf};

/// The text every page of the skeleton started with; none may be left.
const STUB: &str = "This page is being written.";

#[test]
fn every_page_is_in_the_summary_and_none_is_a_stub() {
    let listed: Vec<PathBuf> = summary().iter().map(|e| docs_dir().join(&e.file)).collect();
    let mut problems = Vec::new();
    for page in &listed {
        if !page.is_file() {
            problems.push(format!(
                "SUMMARY.md lists {} which does not exist",
                shown(page)
            ));
        } else if read(page).contains(STUB) {
            problems.push(format!("{} is still a stub", shown(page)));
        }
    }
    for file in markdown_files() {
        let in_docs = file.starts_with(docs_dir());
        let is_summary = file == docs_dir().join("SUMMARY.md");
        if in_docs && !is_summary && !listed.contains(&file) {
            problems.push(format!("{} is not listed in docs/SUMMARY.md", shown(&file)));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_relative_link_reaches_its_file_and_heading() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = read(&file);
        for link in links(&text) {
            let target = link.target.as_str();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                normalize(&file.parent().unwrap_or(Path::new(".")).join(path))
            };
            let at = format!("{}:{}: `{target}`", shown(&file), link.line);
            if !resolved.starts_with(repo_root()) || !resolved.exists() {
                problems.push(format!("{at}: no such file {}", shown(&resolved)));
                continue;
            }
            let is_page = resolved.extension().is_some_and(|e| e == "md");
            if !anchor.is_empty()
                && is_page
                && !heading_ids(&read(&resolved)).iter().any(|id| id == anchor)
            {
                problems.push(format!(
                    "{at}: {} has no heading with id `{anchor}`",
                    shown(&resolved)
                ));
            }
        }
    }
    assert!(
        checked > 0,
        "no relative link was found: the reader is broken"
    );
    assert!(
        problems.is_empty(),
        "{} broken links:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// `path` with `.` and `..` resolved without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
