//! The executable's link layout (`bin/build.rs`): the list of functions the linker puts first is
//! a list of symbol names the linker can read, and the binary the tests run was linked with packed
//! relative relocations, so the build script's arguments reached the linker and a DT_RELR binary
//! starts here (every other test of this crate runs it).

use queuebox_tests::docs::repo_root;
use queuebox_tests::process::binary;
use std::collections::HashSet;

/// DT_RELR, the dynamic tag of a packed relative relocation table.
const DT_RELR: u64 = 36;
const PT_DYNAMIC: u32 = 2;

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("two bytes"))
}
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}
fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

/// The tags of the dynamic section of a little-endian ELF64 file.
fn dynamic_tags(elf: &[u8]) -> Vec<u64> {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not a 64-bit ELF file");
    assert_eq!(elf[5], 1, "not a little-endian ELF file");
    let phoff = u64_at(elf, 0x20) as usize;
    let phentsize = u16_at(elf, 0x36) as usize;
    let phnum = u16_at(elf, 0x38) as usize;
    for index in 0..phnum {
        let header = phoff + index * phentsize;
        if u32_at(elf, header) != PT_DYNAMIC {
            continue;
        }
        let offset = u64_at(elf, header + 0x08) as usize;
        let size = u64_at(elf, header + 0x20) as usize;
        return (offset..offset + size)
            .step_by(16)
            .map(|entry| u64_at(elf, entry))
            .take_while(|&tag| tag != 0)
            .collect();
    }
    panic!("no dynamic segment");
}

#[test]
fn the_layout_list_names_each_function_once_in_a_form_the_linker_reads() {
    let path = repo_root().join("bin/startup-symbols.txt");
    let text = std::fs::read_to_string(&path).expect("read bin/startup-symbols.txt");
    let mut seen = HashSet::new();
    let mut names = 0;
    let mut rust = 0;
    for (number, line) in text.lines().enumerate() {
        if line.starts_with('#') {
            continue;
        }
        let line_number = number + 1;
        // Rust's mangled names (`_ZN...`, `_R...`) and C names (mimalloc, ring's assembly).
        assert!(
            line.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic())
                && line.chars().all(|c| c.is_ascii_graphic()),
            "line {line_number} is not a symbol name: {line:?}"
        );
        // The linker strips what follows a '#' and reads one name a line.
        assert!(
            !line.contains(char::is_whitespace) && !line.contains('#'),
            "line {line_number} holds more than one name: {line:?}"
        );
        assert!(seen.insert(line), "line {line_number} repeats {line}");
        names += 1;
        rust += usize::from(line.starts_with("_ZN") || line.starts_with("_R"));
    }
    assert!(names >= 500, "only {names} names: the list was cut short");
    assert!(
        rust * 4 >= names * 3,
        "{rust} of {names} names are Rust symbols: not a list recorded from queuebox"
    );
}

#[test]
#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
fn the_binary_is_linked_with_packed_relative_relocations() {
    let path = binary();
    let elf = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let tags = dynamic_tags(&elf);
    assert!(
        tags.contains(&DT_RELR),
        "{} has no DT_RELR: bin/build.rs's linker arguments did not apply (tags {tags:?})",
        path.display()
    );
}
