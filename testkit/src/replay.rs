//! The `replay` binary, run against a database as an auditor would.

/// Runs the `replay` binary at `bin` (a test binary's `env!("CARGO_BIN_EXE_replay")`) against
/// the database at `url`, with `env` set: its exit code, stdout and stderr.
pub fn run(bin: &str, url: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = std::process::Command::new(bin)
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

/// Runs the `replay` binary of the calling package's tests: `replay!(url, args)` or
/// `replay!(url, args, env)` (see [`run`]).
#[macro_export]
macro_rules! replay {
    ($url:expr, $args:expr $(,)?) => {
        $crate::replay::run(env!("CARGO_BIN_EXE_replay"), $url, $args, &[])
    };
    ($url:expr, $args:expr, $env:expr $(,)?) => {
        $crate::replay::run(env!("CARGO_BIN_EXE_replay"), $url, $args, $env)
    };
}
