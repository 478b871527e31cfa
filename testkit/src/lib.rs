//! The test kit: what the end-to-end tests (`tests/api`), the replay tests, `scripts/eval` and
//! `scripts/bench` share, written once.
//!
//! - [`Store`], [`both_stores!`] and [`fresh_postgres_database`]: every test that touches a
//!   store runs on both, the PostgreSQL one on a new database of the cluster `scripts/test`
//!   starts;
//! - [`scripted_model`]: an OpenAI-compatible server on loopback, answering from a script;
//! - [`app`]: the real server on port 0 against a fresh database, with typed helpers, and
//!   [`paths`]: the API's addresses;
//! - [`participant`] and [`widget_values`]: a participant over plain HTTP and a valid answer
//!   for each widget;
//! - [`replay`]: the `replay` binary run against a database.
#![forbid(unsafe_code)]

pub mod app;
pub mod participant;
pub mod paths;
pub mod replay;
pub mod scripted_model;
pub mod widget_values;

use sqlx::Connection;

/// The event store a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    /// The embedded default: a SQLite file in the test's own directory.
    Sqlite,
    /// A fresh database on the PostgreSQL cluster named by `TEST_DATABASE_URL`.
    Postgres,
}

/// Generates one `#[tokio::test]` per store for each named `async fn(Store)`, in modules
/// `sqlite` and `postgres` (so a test is named `sqlite::its_name`).
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name($crate::Store::Sqlite).await } )*
        }
        mod postgres {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name($crate::Store::Postgres).await } )*
        }
    };
}

/// A new, empty database on the PostgreSQL cluster named by `TEST_DATABASE_URL` (the README's
/// test command, `scripts/test`, starts one); its URL.
pub async fn fresh_postgres_database() -> String {
    let server = std::env::var("TEST_DATABASE_URL").expect(
        "TEST_DATABASE_URL must name a PostgreSQL server for the postgres tests; \
         run the test command from the README (scripts/test), which starts one",
    );
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&server)
        .await
        .expect("connect to TEST_DATABASE_URL");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create a test database");
    let (base, _) = server
        .rsplit_once('/')
        .expect("TEST_DATABASE_URL has a database path");
    format!("{base}/{name}")
}
