//! What the replay test binaries share.

/// A new database on the PostgreSQL cluster named by `TEST_DATABASE_URL` (`scripts/test` starts
/// one).
pub async fn fresh_postgres_database() -> String {
    use sqlx::Connection;
    let server = std::env::var("TEST_DATABASE_URL")
        .expect("TEST_DATABASE_URL names the PostgreSQL cluster for the postgres tests (scripts/test starts one)");
    let name = format!("r_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&server).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    let (base, _) = server.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}
