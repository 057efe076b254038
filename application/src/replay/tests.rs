//! Unit tests of the replay walk with a mocked store: the paging, the destination decision per row
//! and the failure part way. The SQL itself is tested against PostgreSQL in the adapter.

use super::*;
use mockall::mock;
use mockall::predicate::eq;
use queuebox_domain::router::RouteSpec;
use queuebox_ports::outbox::StoreError;
use queuebox_ports::replay::ReplayCandidate;

mock! {
    Store {}
    #[async_trait]
    impl ReplayStore for Store {
        async fn replay_candidates(
            &self,
            selection: &ReplaySelection,
            after: Option<Uuid>,
            limit: u32,
        ) -> Result<Vec<ReplayCandidate>, StoreError>;
        async fn move_to_pending(&self, ids: &[Uuid]) -> Result<u64, StoreError>;
    }
}

/// Overlapping patterns: `order.created` goes to billing (first match), every other `order.*` to
/// archive, everything else to audit.
fn router() -> Router {
    let spec = |pattern: &str, destination: &str| RouteSpec {
        topic_pattern: pattern.to_owned(),
        destination: destination.to_owned(),
    };
    Router::new(
        &[
            spec("order.created", "billing"),
            spec("order.*", "archive"),
            spec("**", "audit"),
        ],
        ["billing", "archive", "audit"],
    )
    .expect("routes compile")
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn row(n: u128, topic: &str) -> ReplayCandidate {
    ReplayCandidate {
        id: id(n),
        topic: topic.to_owned(),
    }
}

fn service(store: MockStore, batch: u32) -> ReplayService {
    ReplayService::new(Arc::new(store), router(), batch)
}

#[tokio::test]
async fn an_empty_filter_is_refused_before_the_store_is_asked() {
    // No expectation set: any store call would panic.
    let replay = service(MockStore::new(), 10);
    let result = replay.replay(&ReplayFilter::default()).await;
    assert!(matches!(result, Err(ReplayError::NoFilter)), "{result:?}");
}

#[tokio::test]
async fn pages_follow_the_last_id_until_a_short_page() {
    let mut store = MockStore::new();
    let mut sequence = mockall::Sequence::new();
    let selection = ReplaySelection {
        topic: Some("order.paid".into()),
        ..ReplaySelection::default()
    };
    for (after, page) in [
        (None, vec![row(1, "order.paid"), row(2, "order.paid")]),
        (
            Some(id(2)),
            vec![row(3, "order.paid"), row(4, "order.paid")],
        ),
        (Some(id(4)), vec![row(5, "order.paid")]),
    ] {
        let ids: Vec<Uuid> = page.iter().map(|r| r.id).collect();
        let count = ids.len() as u64;
        store
            .expect_replay_candidates()
            .with(eq(selection.clone()), eq(after), eq(2))
            .times(1)
            .in_sequence(&mut sequence)
            .return_once(move |_, _, _| Ok(page));
        store
            .expect_move_to_pending()
            .withf(move |moved| moved == ids.as_slice())
            .times(1)
            .in_sequence(&mut sequence)
            .return_once(move |_| Ok(count));
    }
    let filter = ReplayFilter {
        topic: Some("order.paid".into()),
        ..ReplayFilter::default()
    };
    assert_eq!(service(store, 2).replay(&filter).await.expect("replay"), 5);
}

#[tokio::test]
async fn a_full_last_page_asks_once_more_and_stops_on_an_empty_one() {
    let mut store = MockStore::new();
    store
        .expect_replay_candidates()
        .with(mockall::predicate::always(), eq(None), eq(2))
        .return_once(|_, _, _| Ok(vec![row(1, "a"), row(2, "b")]));
    store
        .expect_replay_candidates()
        .with(mockall::predicate::always(), eq(Some(id(2))), eq(2))
        .return_once(|_, _, _| Ok(vec![]));
    store.expect_move_to_pending().times(1).returning(|_| Ok(2));
    let filter = ReplayFilter {
        ids: Some(vec![id(1), id(2)]),
        ..ReplayFilter::default()
    };
    assert_eq!(service(store, 2).replay(&filter).await.expect("replay"), 2);
}

#[tokio::test]
async fn the_destination_keeps_only_rows_whose_first_matching_route_goes_there() {
    let mut store = MockStore::new();
    store.expect_replay_candidates().return_once(|_, _, _| {
        Ok(vec![
            row(1, "order.created"), // billing: the first route wins over order.*
            row(2, "order.paid"),    // archive
            row(3, "invoice.sent"),  // audit
            row(4, "order.shipped"), // archive
        ])
    });
    store
        .expect_move_to_pending()
        .withf(|ids| ids == [id(2), id(4)])
        .times(1)
        .returning(|ids| Ok(ids.len() as u64));
    let filter = ReplayFilter {
        destination: Some("archive".into()),
        ..ReplayFilter::default()
    };
    assert_eq!(service(store, 10).replay(&filter).await.expect("replay"), 2);
}

#[tokio::test]
async fn a_page_with_no_row_for_the_destination_moves_nothing_and_the_walk_goes_on() {
    let mut store = MockStore::new();
    store
        .expect_replay_candidates()
        .with(mockall::predicate::always(), eq(None), eq(2))
        .return_once(|_, _, _| Ok(vec![row(1, "order.created"), row(2, "order.created")]));
    store
        .expect_replay_candidates()
        .with(mockall::predicate::always(), eq(Some(id(2))), eq(2))
        .return_once(|_, _, _| Ok(vec![row(3, "x.y")]));
    store
        .expect_move_to_pending()
        .withf(|ids| ids == [id(3)])
        .times(1)
        .returning(|_| Ok(1));
    let filter = ReplayFilter {
        destination: Some("audit".into()),
        ..ReplayFilter::default()
    };
    assert_eq!(service(store, 2).replay(&filter).await.expect("replay"), 1);
}

#[tokio::test]
async fn an_unknown_destination_moves_nothing() {
    let mut store = MockStore::new();
    store
        .expect_replay_candidates()
        .return_once(|_, _, _| Ok(vec![row(1, "order.created")]));
    store.expect_move_to_pending().never();
    let filter = ReplayFilter {
        destination: Some("nowhere".into()),
        ..ReplayFilter::default()
    };
    assert_eq!(service(store, 10).replay(&filter).await.expect("replay"), 0);
}

#[tokio::test]
async fn a_store_failure_reports_what_moved_before_it() {
    let mut store = MockStore::new();
    store
        .expect_replay_candidates()
        .with(mockall::predicate::always(), eq(None), eq(1))
        .return_once(|_, _, _| Ok(vec![row(1, "a")]));
    store
        .expect_replay_candidates()
        .with(mockall::predicate::always(), eq(Some(id(1))), eq(1))
        .return_once(|_, _, _| {
            Err(StoreError {
                operation: "replay",
                reason: "connection reset".into(),
            })
        });
    store.expect_move_to_pending().times(1).returning(|_| Ok(1));
    let filter = ReplayFilter {
        topics: Some(vec!["a".into()]),
        ..ReplayFilter::default()
    };
    let error = service(store, 1)
        .replay(&filter)
        .await
        .expect_err("the second page fails");
    assert!(
        matches!(error, ReplayError::Store { moved: 1, .. }),
        "{error:?}"
    );
}
