//! Which offsets a handled batch lets the source commit, and where it must read again.
//!
//! An offset says that every record before it is done, so per partition only the unbroken run of
//! done records from the first one of the batch may be stored for the commit. When a record of
//! that partition must be read again, the stored offset stays on it and the consumer seeks back to
//! it: the records after it are read again too, and the inbox's idempotency key turns the ones
//! already stored into duplicates. Nothing is ever skipped.

use std::collections::BTreeMap;

/// One handled record: where it sits and whether its offset may move past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Handled<'a> {
    pub(crate) topic: &'a str,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) done: bool,
}

/// What to tell the consumer about one partition after a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionPlan {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    /// The offset to store for the next commit (the next record to read), when the batch moved it.
    pub(crate) store: Option<i64>,
    /// The offset to seek back to: the first record of the partition that must be read again.
    pub(crate) seek: Option<i64>,
}

/// The plan of each partition of a batch, in topic and partition order.
pub(crate) fn plan(handled: &[Handled<'_>]) -> Vec<PartitionPlan> {
    let mut partitions: BTreeMap<(&str, i32), Vec<(i64, bool)>> = BTreeMap::new();
    for record in handled {
        partitions
            .entry((record.topic, record.partition))
            .or_default()
            .push((record.offset, record.done));
    }
    partitions
        .into_iter()
        .map(|((topic, partition), mut records)| {
            records.sort_unstable_by_key(|(offset, _)| *offset);
            let first_retry = records.iter().find(|(_, done)| !done).map(|(o, _)| *o);
            let last_done = records
                .iter()
                .take_while(|(_, done)| *done)
                .last()
                .map(|(offset, _)| *offset);
            PartitionPlan {
                topic: topic.to_owned(),
                partition,
                store: match first_retry {
                    // The failed record is the next to read: store its offset, unless the run
                    // before it is empty (the stored offset is already at or before it).
                    Some(retry) => last_done.map(|_| retry),
                    None => last_done.map(|offset| offset + 1),
                },
                seek: first_retry,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handled(topic: &str, partition: i32, offset: i64, done: bool) -> Handled<'_> {
        Handled {
            topic,
            partition,
            offset,
            done,
        }
    }

    #[test]
    fn an_unbroken_run_stores_the_offset_after_its_last_record() {
        let plans = plan(&[
            handled("t", 0, 5, true),
            handled("t", 0, 6, true),
            handled("t", 1, 9, true),
        ]);
        assert_eq!(
            plans,
            vec![
                PartitionPlan {
                    topic: "t".into(),
                    partition: 0,
                    store: Some(7),
                    seek: None
                },
                PartitionPlan {
                    topic: "t".into(),
                    partition: 1,
                    store: Some(10),
                    seek: None
                },
            ]
        );
    }

    #[test]
    fn a_failed_record_stops_the_run_and_is_read_again_with_everything_after_it() {
        // Handled out of order (different keys run side by side): the plan sorts by offset.
        let plans = plan(&[
            handled("t", 0, 7, true),
            handled("t", 0, 5, true),
            handled("t", 0, 6, false),
            handled("t", 0, 8, false),
        ]);
        assert_eq!(
            plans,
            vec![PartitionPlan {
                topic: "t".into(),
                partition: 0,
                store: Some(6),
                seek: Some(6)
            }]
        );
    }

    #[test]
    fn a_failure_at_the_start_stores_nothing_and_seeks_to_it() {
        let plans = plan(&[handled("t", 3, 40, false), handled("t", 3, 41, true)]);
        assert_eq!(
            plans,
            vec![PartitionPlan {
                topic: "t".into(),
                partition: 3,
                store: None,
                seek: Some(40)
            }]
        );
    }

    #[test]
    fn topics_are_planned_apart() {
        let plans = plan(&[handled("b", 0, 1, true), handled("a", 0, 1, false)]);
        assert_eq!(plans[0].topic, "a");
        assert_eq!(plans[0].seek, Some(1));
        assert_eq!(plans[1].topic, "b");
        assert_eq!(plans[1].store, Some(2));
    }
}
