//! Test support: a database of its own per test, dropped at the end even when the test fails.
//!
//! Tests that need PostgreSQL read a server URL from `FAIRWAY_TEST_POSTGRES` (for example
//! `postgres://postgres@127.0.0.1:5432/postgres`) and print "skipped" without it, so that
//! `cargo test` passes on a machine without PostgreSQL. Hidden from the docs: public only so
//! that other crates' tests can use it.

use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that holds the test server's URL.
pub const TEST_URL_ENV: &str = "FAIRWAY_TEST_POSTGRES";

/// A database created for one test (`fairway_test_<pid>_<n>_<nanos>`), dropped on drop with
/// `WITH (FORCE)`, which also ends the sessions of processes the test killed or stopped.
#[derive(Debug)]
pub struct TestDb {
    admin_url: String,
    name: String,
    url: String,
}

impl TestDb {
    /// A new database on the server named by `FAIRWAY_TEST_POSTGRES`, or `None` (after
    /// printing "skipped: TEST") when the variable is unset or empty.
    ///
    /// Panics when the variable is set but the server cannot be reached: a CI that meant to run
    /// these tests must not pass without running them.
    pub fn create(test: &str) -> Option<TestDb> {
        let admin_url = match std::env::var(TEST_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => url.trim().to_owned(),
            _ => {
                println!("skipped: {test} (set {TEST_URL_ENV} to a PostgreSQL URL to run it)");
                return None;
            }
        };
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "fairway_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let url = with_database(&admin_url, &name);
        admin(&admin_url, &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("{TEST_URL_ENV}={admin_url}: creating {name}: {e}"));
        Some(TestDb {
            admin_url,
            name,
            url,
        })
    }

    /// The URL of this test's database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of this test's database with `search_path` set to `schema`, which must exist
    /// (see [`TestDb::create_schema`]).
    pub fn url_with_schema(&self, schema: &str) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{schema}", self.url)
    }

    /// Creates a schema in this test's database.
    pub fn create_schema(&self, schema: &str) {
        admin(&self.url, &format!("CREATE SCHEMA {schema}"))
            .unwrap_or_else(|e| panic!("creating schema {schema}: {e}"));
    }

    /// Runs `statements` on this test's database and returns every row of the last one, each
    /// column as text (NULL as `None`). For checks on what is in the database.
    pub fn query(&self, statements: &str) -> Vec<Vec<Option<String>>> {
        query_text(&self.url, statements).unwrap_or_else(|e| panic!("{statements}: {e}"))
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        if let Err(e) = admin(&self.admin_url, &statement) {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

/// `url` with its database replaced by `database` (a `postgres://` URL is expected).
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |i| after_scheme + i);
    let mut out = format!("{}/{database}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// Runs SQL on a thread of its own (so that it works from sync and async tests alike).
fn admin(url: &str, statement: &str) -> Result<(), String> {
    query_text(url, statement).map(drop)
}

fn query_text(url: &str, statements: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    let url = url.to_owned();
    let statements = statements.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| format!("connecting to {url}: {e}"))?;
            let driver = tokio::spawn(connection);
            let messages =
                client
                    .simple_query(&statements)
                    .await
                    .map_err(|e| match e.as_db_error() {
                        Some(db) => db.message().to_string(),
                        None => e.to_string(),
                    })?;
            drop(client);
            let _ = driver.await;
            let mut rows = Vec::new();
            let mut pending = Vec::new();
            for message in messages {
                match message {
                    tokio_postgres::SimpleQueryMessage::Row(row) => pending.push(
                        (0..row.len())
                            .map(|i| row.get(i).map(str::to_owned))
                            .collect(),
                    ),
                    // Each statement's rows replace the previous one's: the last one counts.
                    tokio_postgres::SimpleQueryMessage::CommandComplete(_) => {
                        rows = std::mem::take(&mut pending);
                    }
                    _ => {}
                }
            }
            Ok(rows)
        })
    })
    .join()
    .map_err(|_| "the SQL thread panicked".to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url_is_replaced() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "t1"),
            "postgres://postgres@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u@h:1", "t1"),
            "postgres://u@h:1/t1"
        );
        assert_eq!(
            with_database("postgres://u@h/db?sslmode=disable", "t1"),
            "postgres://u@h/t1?sslmode=disable"
        );
    }
}
