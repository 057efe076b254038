//! Replays every checked-in corpus file of every target on stable Rust, then a few
//! deterministic mutations of each (bytes flipped, cut, repeated), so CI runs a short, repeatable
//! fuzz pass without libFuzzer. A failure names the target and the input file.

use std::path::{Path, PathBuf};

/// Mutations tried per corpus file.
const MUTATIONS: usize = 5;

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// A small xorshift generator: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(5) {
            0 if !out.is_empty() => {
                let at = rng.below(out.len());
                out[at] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let at = rng.below(out.len());
                out.truncate(at);
            }
            2 => {
                let at = rng.below(out.len() + 1);
                let byte = [
                    b'{', b'}', b'[', b'"', b'\\', b':', b'\n', 0, 0xff, b'$', b'.',
                ][rng.below(11)];
                out.insert(at, byte);
            }
            3 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + rng.below(16)).min(out.len());
                let piece = out[start..end].to_vec();
                let at = rng.below(out.len() + 1);
                out.splice(at..at, piece.iter().copied().cycle().take(piece.len() * 8));
            }
            _ => {
                let at = rng.below(out.len() + 1);
                out.insert(at, rng.next() as u8);
            }
        }
    }
    out
}

#[test]
fn every_corpus_input_and_its_mutations_pass_every_target() {
    for (name, target) in queuebox_fuzz::TARGETS {
        let files = corpus(name);
        assert!(!files.is_empty(), "the {name} corpus is empty");
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for file in files {
            let input = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let run = |data: &[u8], what: &str| {
                let outcome = std::panic::catch_unwind(|| target(data));
                assert!(
                    outcome.is_ok(),
                    "target {name} failed on {what} of {} (input {:?})",
                    file.display(),
                    String::from_utf8_lossy(data)
                );
            };
            run(&input, "the corpus file");
            for n in 0..MUTATIONS {
                let mutated = mutate(&input, &mut rng);
                run(&mutated, &format!("mutation {n}"));
            }
        }
    }
}
