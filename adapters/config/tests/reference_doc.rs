//! The configuration reference names exactly the keys the reader reads, with the reader's types,
//! defaults, limits and variables.
//!
//! `docs/reference/configuration.md` holds one table per block, each after a marker
//! `<!-- config-keys: SECTION -->` naming a section of [`queuebox_config::catalog::sections`]. The
//! first five cells of a row (key, type, default, allowed, variable) must equal the catalog's; the
//! description cell is the page's own. Both directions fail: a key the reader reads and the page
//! lacks, and a key the page names that the reader does not read (it would be an unknown key).
//! On a failure the message prints the rows to paste.

use queuebox_config::catalog::{KeyRow, Section, markdown_table, sections};
use std::collections::BTreeMap;
use std::path::Path;

const PAGE: &str = "docs/reference/configuration.md";
const MARKER: &str = "<!-- config-keys: ";

/// The page's tables: section id -> (line, rows of cells).
fn page_tables(text: &str) -> BTreeMap<String, (usize, Vec<Vec<String>>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut tables = BTreeMap::new();
    for (index, line) in lines.iter().enumerate() {
        let Some(id) = line
            .trim()
            .strip_prefix(MARKER)
            .and_then(|rest| rest.strip_suffix("-->"))
        else {
            continue;
        };
        let rows: Vec<Vec<String>> = lines[index + 1..]
            .iter()
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| l.trim_start().starts_with('|'))
            // The header and its separator.
            .skip(2)
            .map(|row| {
                row.trim()
                    .trim_matches('|')
                    .split('|')
                    .map(|cell| cell.trim().to_owned())
                    .collect()
            })
            .collect();
        let previous = tables.insert(id.trim().to_owned(), (index + 1, rows));
        assert!(previous.is_none(), "{PAGE}: section `{id}` has two tables");
    }
    tables
}

fn row_text(row: &KeyRow) -> String {
    format!("| {} | <description> |", row.cells().join(" | "))
}

fn compare(section: &Section, line: usize, rows: &[Vec<String>], problems: &mut Vec<String>) {
    let documented: BTreeMap<&str, &Vec<String>> = rows
        .iter()
        .filter_map(|cells| cells.first().map(|key| (key.as_str(), cells)))
        .collect();
    for row in &section.rows {
        let expected = row.cells();
        match documented.get(expected[0].as_str()) {
            None => problems.push(format!(
                "{PAGE}:{line}: `{}` lacks the key the reader reads:\n  {}",
                section.id,
                row_text(row)
            )),
            Some(cells) if cells.len() < 6 || cells[..5] != expected => problems.push(format!(
                "{PAGE}:{line}: `{}` states {} differently; the reader says:\n  {}\n  the page says:\n  | {} |",
                section.id,
                expected[0],
                row_text(row),
                cells.join(" | ")
            )),
            Some(_) => {}
        }
    }
    for key in documented.keys() {
        if !section.rows.iter().any(|row| row.cells()[0] == *key) {
            problems.push(format!(
                "{PAGE}:{line}: `{}` names {key}, which the reader does not read (an unknown key)",
                section.id
            ));
        }
    }
}

#[test]
fn the_reference_names_every_key_the_reader_reads_and_no_other() {
    let catalog = sections().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join(PAGE)).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    let tables = page_tables(&text);
    let mut problems = Vec::new();
    for section in &catalog {
        match tables.get(&section.id) {
            Some((line, rows)) => compare(section, *line, rows, &mut problems),
            None => problems.push(format!(
                "{PAGE}: no table for `{}`; add:\n\n{MARKER}{} -->\n{}",
                section.id,
                section.id,
                markdown_table(section)
            )),
        }
    }
    for (id, (line, _)) in &tables {
        if !catalog.iter().any(|section| &section.id == id) {
            problems.push(format!(
                "{PAGE}:{line}: `{id}` is not a block the reader reads"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the configuration reference and the reader disagree ({} problems):\n\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

#[test]
fn the_catalog_is_consistent() {
    // The catalog's own consistency: every key has a type and one declaration across the files it
    // reads. `sections` reports both; this names the failure plainly when it is the cause.
    if let Err(error) = sections() {
        panic!("{error}");
    }
}
