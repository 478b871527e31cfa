//! An applied migration is never edited. sqlx records each migration's checksum (SHA-384 of its
//! whole text, comments included) when it runs, and refuses to start on a database whose
//! applied migration no longer matches: one changed comment would stop every deployment on its
//! next start. Fresh test databases cannot notice, so the checksums are held here.
//!
//! A new migration: add its line to `migration_checksums.txt` (the failure prints it).

use interview_session::hash::to_hex;

const RECORDED: &str = include_str!("migration_checksums.txt");

fn checksums() -> Vec<String> {
    let mut lines = Vec::new();
    for (backend, migrator) in [
        ("postgres", sqlx::migrate!("../migrations/postgres")),
        ("sqlite", sqlx::migrate!("../migrations/sqlite")),
    ] {
        for m in migrator.iter() {
            lines.push(format!(
                "{backend} {:04} {}",
                m.version,
                to_hex(&m.checksum)
            ));
        }
    }
    lines
}

#[test]
fn applied_migrations_are_never_edited() {
    let recorded: Vec<&str> = RECORDED.lines().filter(|l| !l.trim().is_empty()).collect();
    let now = checksums();
    for line in &recorded {
        let (key, _) = line.rsplit_once(' ').unwrap();
        let current = now.iter().find(|n| n.starts_with(&format!("{key} ")));
        assert_eq!(
            current.map(String::as_str),
            Some(*line),
            "migration {key} was edited or removed: an applied migration must stay byte for byte \
             as it was (write a new migration instead)"
        );
    }
    let new: Vec<&String> = now
        .iter()
        .filter(|n| !recorded.contains(&n.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "new migrations: add these lines to projections/tests/migration_checksums.txt\n{}",
        new.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
