//! Which messages of a batch go one after the other: two messages that share an order key (a
//! Kafka partition and record key) or an idempotency key are one chain, stored in batch order,
//! so the first of a key is the row kept and the later ones are its duplicates. Chains run side
//! by side.

use std::collections::HashMap;

/// The chains of a batch of `keys.len()` messages, each a list of message indexes in batch
/// order; `keys[i]` are the keys of message `i`. Chains come in the order of their first message.
pub(crate) fn chains(keys: &[Vec<String>]) -> Vec<Vec<usize>> {
    let mut parent: Vec<usize> = (0..keys.len()).collect();
    let mut owner: HashMap<&str, usize> = HashMap::new();
    for (index, message_keys) in keys.iter().enumerate() {
        for key in message_keys {
            match owner.get(key.as_str()) {
                Some(&first) => union(&mut parent, first, index),
                None => {
                    owner.insert(key.as_str(), index);
                }
            }
        }
    }
    let mut chain_of_root: HashMap<usize, usize> = HashMap::new();
    let mut chains: Vec<Vec<usize>> = Vec::new();
    for index in 0..keys.len() {
        let root = find(&mut parent, index);
        let chain = *chain_of_root.entry(root).or_insert_with(|| {
            chains.push(Vec::new());
            chains.len() - 1
        });
        chains[chain].push(index);
    }
    chains
}

fn find(parent: &mut [usize], mut index: usize) -> usize {
    while parent[index] != index {
        parent[index] = parent[parent[index]];
        index = parent[index];
    }
    index
}

fn union(parent: &mut [usize], a: usize, b: usize) {
    let (a, b) = (find(parent, a), find(parent, b));
    if a != b {
        // The smaller index stays the root: it is the chain's first message.
        let (root, child) = if a < b { (a, b) } else { (b, a) };
        parent[child] = root;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(list: &[&[&str]]) -> Vec<Vec<String>> {
        list.iter()
            .map(|k| k.iter().map(|s| (*s).to_owned()).collect())
            .collect()
    }

    #[test]
    fn messages_sharing_a_key_form_one_chain_in_batch_order() {
        let chained = chains(&keys(&[
            &["i:a"],
            &[],
            &["o:p1", "i:b"],
            &["i:a"],
            &["o:p1", "i:c"],
            &["i:c", "i:d"],
            &[],
        ]));
        assert_eq!(chained, vec![vec![0, 3], vec![1], vec![2, 4, 5], vec![6]]);
    }

    #[test]
    fn a_message_joining_two_chains_merges_them() {
        let chained = chains(&keys(&[&["i:a"], &["i:b"], &["i:a", "i:b"]]));
        assert_eq!(chained, vec![vec![0, 1, 2]]);
    }
}
