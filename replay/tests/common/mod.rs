//! What the replay test binaries share.

pub use interview_test_kit::fresh_postgres_database;

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
