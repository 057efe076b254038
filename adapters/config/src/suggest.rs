//! The nearest known key for an unknown one, by edit distance.

/// The known key closest to `unknown`, if close enough to be a likely typo.
///
/// Letter case, `.`, `_` and `-` are ignored before measuring, so `poll.interval.ms` (a variable
/// that split a camel-case name) finds `pollIntervalMs`.
pub fn nearest<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    let wanted = squash(unknown);
    let (best, distance) = known
        .iter()
        .map(|k| (*k, levenshtein(&wanted, &squash(k))))
        .min_by_key(|(_, d)| *d)?;
    let limit = (wanted.chars().count() / 3).max(2);
    (distance <= limit).then_some(best)
}

fn squash(key: &str) -> String {
    key.chars()
        .filter(|c| !matches!(c, '.' | '_' | '-' | '[' | ']'))
        .flat_map(char::to_lowercase)
        .collect()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j] + cost)
                    .min(previous[j + 1] + 1)
                    .min(current[j] + 1),
            );
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_split_camel_case_and_typos() {
        let known = ["pollIntervalMs", "batchSize", "concurrency"];
        assert_eq!(nearest("poll.interval.ms", &known), Some("pollIntervalMs"));
        assert_eq!(nearest("batchSise", &known), Some("batchSize"));
        assert_eq!(nearest("somethingElse", &known), None);
    }
}
