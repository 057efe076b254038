//! Link settings of the `queuebox` executable that make an idle process smaller.
//!
//! On x86_64 Linux, where rustc links with LLD:
//! - the functions start-up and an idle service run are laid out next to each other, followed by
//!   the further ones a drain runs, hottest first (`startup-symbols.txt`, written by
//!   `bench/startup-symbols.sh`). The kernel maps a code page together with its cached neighbours
//!   on every fault, so start-up code scattered over the whole text made most of it resident;
//!   packed, the same work maps a fraction of it. Rust 1.90 and later link this target with LLD by
//!   default (the workspace asks for 1.95); the ordering file is an LLD (and mold) option that GNU
//!   ld does not know.
//! - relative relocations are packed (DT_RELR, glibc 2.36 or later): the dynamic loader reads
//!   11 kB instead of a 770 kB relocation table at every start.
//!
//! On Linux a release build leaves the symbol table out (`--strip-all`), as `strip = "symbols"` in
//! the profile would, unless `QUEUEBOX_KEEP_SYMBOLS=1`: a profile setting changes every symbol's
//! hash, a linker argument does not, so the unstripped build that records the list names the same
//! functions as the build that ships.
//!
//! None of this changes what the program does, only where its bytes sit.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=startup-symbols.txt");
    println!("cargo:rerun-if-env-changed=QUEUEBOX_KEEP_SYMBOLS");
    let target = env::var("TARGET").unwrap_or_default();
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let release = env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let keep_symbols = env::var("QUEUEBOX_KEEP_SYMBOLS").is_ok_and(|value| value == "1");
    if target_os == "linux" && release && !keep_symbols {
        println!("cargo:rustc-link-arg-bins=-Wl,--strip-all");
    }
    if target != "x86_64-unknown-linux-gnu" {
        return;
    }
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let order = manifest_dir.join("startup-symbols.txt");
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    // A symbol the list names but this build lacks (renamed, inlined, feature left out) is skipped.
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
}
