//! Behaviour specific to the PostgreSQL backend: migrations, the election, and fencing by term.
//! Each test runs on a database of its own where `FAIRWAY_TEST_POSTGRES` names a server, and
//! says "skipped" otherwise.

use fairway_store::conformance::{sample_event, sample_events};
use fairway_store::postgres::testing::TestDb;
use fairway_store::{Batch, EventStore, Leadership, PgStore, StoreError};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

// Proves: replicas that start together on an empty database apply the migrations once (the
// advisory lock serialises them; none fails on a half-created table), and the version is
// recorded once.
#[test]
fn migrations_run_once_when_replicas_start_together() {
    let Some(db) = TestDb::create("migrations_run_once_when_replicas_start_together") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..6 {
            let url = db.url().to_owned();
            tasks.push(tokio::spawn(async move {
                Leadership::connect(&url, &format!("r{i}"), "http://r.invalid", 1_000).await
            }));
        }
        for t in tasks {
            t.await
                .unwrap()
                .expect("every replica migrates or finds it done");
        }
    });
    let rows = db.query("SELECT version FROM fairway_schema ORDER BY version");
    assert_eq!(rows, vec![vec![Some("1".to_string())]]);
}

// Proves: a database whose schema is newer than this build is refused with `NewerSchema`
// naming both versions, and the refusal changes nothing.
#[test]
fn a_newer_schema_is_refused() {
    let Some(db) = TestDb::create("a_newer_schema_is_refused") else {
        return;
    };
    let rt = runtime();
    rt.block_on(Leadership::connect(
        db.url(),
        "a",
        "http://a.invalid",
        1_000,
    ))
    .unwrap();
    db.query("INSERT INTO fairway_schema (version) VALUES (2)");
    let err = rt
        .block_on(Leadership::connect(
            db.url(),
            "a",
            "http://a.invalid",
            1_000,
        ))
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NewerSchema {
                found: 2,
                supported: 1
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("version 2"), "{err}");
    let rows = db.query("SELECT count(*) FROM fairway_schema");
    assert_eq!(rows, vec![vec![Some("2".to_string())]]);
}

// Proves: the first replica takes the free row at term 1; another cannot take it while the
// lease is live; the holder renews it; once it has expired another replica takes it with
// term 2, and the old holder's renewal then fails (it is deposed), and a resignation frees the
// row at once.
#[test]
fn election_takes_only_an_expired_row_and_raises_the_term() {
    let Some(db) = TestDb::create("election_takes_only_an_expired_row_and_raises_the_term") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let a = Leadership::connect(db.url(), "a", "http://a.invalid", 60_000)
            .await
            .unwrap();
        let b = Leadership::connect(db.url(), "b", "http://b.invalid", 60_000)
            .await
            .unwrap();
        assert_eq!(a.current().await.unwrap(), None);
        assert_eq!(a.try_acquire().await.unwrap(), Some(1));
        assert_eq!(b.try_acquire().await.unwrap(), None, "the lease is live");
        assert!(a.renew(1).await.unwrap());
        let row = b.current().await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.term, row.live), ("a", 1, true));
        assert_eq!(row.address, "http://a.invalid");
        assert!(row.remaining_ms > 50_000, "{row:?}");

        a.expire_for_test().await.unwrap();
        assert_eq!(b.try_acquire().await.unwrap(), Some(2));
        assert!(!a.renew(1).await.unwrap(), "a is deposed");
        assert!(b.renew(2).await.unwrap());
        assert_eq!(a.try_acquire().await.unwrap(), None);

        b.resign(2).await.unwrap();
        assert_eq!(
            a.try_acquire().await.unwrap(),
            Some(3),
            "resigned: free at once"
        );
    });
}

// Proves the fencing argument of docs/store.md: once another replica has taken the term, the
// old leader's commit, snapshot and term check are refused with `Deposed` and write nothing,
// the old store is poisoned, and the new leader continues the log exactly where the last
// successful commit left it. Every row records the term that wrote it.
#[test]
fn a_deposed_leader_commits_nothing() {
    let Some(db) = TestDb::create("a_deposed_leader_commits_nothing") else {
        return;
    };
    let mut old = PgStore::open_leading(db.url(), "old", "http://old.invalid", 60_000).unwrap();
    assert_eq!(old.fence_of().term, 1);
    old.commit(&Batch {
        events: sample_events(1, 3),
        put_payloads: vec![("kept".into(), b"k".to_vec())],
        delete_payloads: vec![],
    })
    .unwrap();
    old.fence().unwrap();

    // Another replica takes over after the old one's lease ran out.
    let rt = runtime();
    let term = rt.block_on(async {
        let new = Leadership::connect(db.url(), "new", "http://new.invalid", 60_000)
            .await
            .unwrap();
        new.expire_for_test().await.unwrap();
        new.try_acquire().await.unwrap().unwrap()
    });
    assert_eq!(term, 2);

    let err = old
        .commit(&Batch {
            events: sample_events(4, 2),
            put_payloads: vec![("late".into(), b"l".to_vec())],
            delete_payloads: vec!["kept".into()],
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::Deposed { term: 1, .. }), "{err}");
    assert!(matches!(old.fence(), Err(StoreError::Poisoned)));
    assert!(matches!(
        old.put_snapshot(3, b"s"),
        Err(StoreError::Poisoned)
    ));
    drop(old);

    let mut new = PgStore::open(
        db.url(),
        fairway_store::Fence {
            holder: "new".into(),
            term,
            lease_ms: 60_000,
        },
    )
    .unwrap();
    assert_eq!(new.last_lsn(), 3, "nothing of the deposed leader's commit");
    assert_eq!(new.payload("kept").unwrap(), Some(b"k".to_vec()));
    assert_eq!(new.payload("late").unwrap(), None);
    assert_eq!(
        new.commit(&Batch::of_events(sample_events(4, 1))).unwrap(),
        4
    );
    let recovered = new.recover().unwrap();
    let expected: Vec<_> = (1..=4).map(|n| (n, sample_event(n))).collect();
    assert_eq!(recovered.events, expected);
    let terms = db.query("SELECT lsn, term FROM fairway_events ORDER BY lsn");
    let terms: Vec<(String, String)> = terms
        .into_iter()
        .map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap()))
        .collect();
    assert_eq!(
        terms,
        [("1", "1"), ("2", "1"), ("3", "1"), ("4", "2")]
            .map(|(l, t)| (l.to_string(), t.to_string()))
    );

    // A fresh open with a stale fence fails its term check, and is refused at its first
    // write, too.
    let mut stale = PgStore::open(
        db.url(),
        fairway_store::Fence {
            holder: "old".into(),
            term: 1,
            lease_ms: 60_000,
        },
    )
    .unwrap();
    assert!(matches!(
        stale.fence(),
        Err(StoreError::Deposed { term: 1, .. })
    ));
    let mut stale = PgStore::open(
        db.url(),
        fairway_store::Fence {
            holder: "old".into(),
            term: 1,
            lease_ms: 60_000,
        },
    )
    .unwrap();
    assert!(matches!(
        stale.commit(&Batch::of_events(sample_events(5, 1))),
        Err(StoreError::Deposed { .. })
    ));
    assert_eq!(
        new.commit(&Batch::of_events(sample_events(5, 1))).unwrap(),
        5
    );
}

// Proves: `open_leading` refuses to write while another replica holds a live lease.
#[test]
fn open_leading_refuses_a_held_row() {
    let Some(db) = TestDb::create("open_leading_refuses_a_held_row") else {
        return;
    };
    let _first = PgStore::open_leading(db.url(), "first", "http://f.invalid", 60_000).unwrap();
    let err = PgStore::open_leading(db.url(), "second", "http://s.invalid", 60_000).unwrap_err();
    assert!(matches!(err, StoreError::Deposed { .. }), "{err}");
}
