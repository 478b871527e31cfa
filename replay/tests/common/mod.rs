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

/// Runs the `replay` binary against the database at `url`: its exit code, stdout and stderr.
#[allow(dead_code)] // not every test binary runs it
pub fn replay(url: &str, args: &[&str]) -> (i32, String, String) {
    replay_with(url, args, &[])
}

/// [`replay`] with more environment variables.
#[allow(dead_code)] // not every test binary runs it
pub fn replay_with(url: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_replay"))
        .args(args)
        .env("DATABASE_URL", url)
        .envs(env.iter().copied())
        .output()
        .expect("replay runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
