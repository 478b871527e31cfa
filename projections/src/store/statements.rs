//! Statements shared across the layers, and pieces of SQL built at run time, the same on both
//! backends but for how they number values.
//!
//! Where SQL lives: a statement whose text is fixed is a `.sql` file in its layer's `sql/` folder,
//! named for what it does and included where it runs (`include_str!`); one used by several layers
//! is a constant here. A statement assembled at run time — from a column list (`columns.rs`,
//! `log::EVENT_COLUMNS`), with many rows' placeholders, or differing by backend — is built next to
//! what it is built from.

/// Stores a pinned study document once (the first copy of a version stays).
pub const INSERT_DOCUMENT: &str = include_str!("sql/insert_document.sql");

/// The placeholders of a multi-row statement: `($1, $2), ($3, $4)` on PostgreSQL, `(?, ?),
/// (?, ?)` on SQLite, for `rows` rows of `columns` values bound in order. (SQLite reads `$1` as a
/// *named* parameter and looks each one up by name, which makes a statement with thousands of
/// them slow to prepare; `?` is positional.)
pub(crate) fn placeholders<DB: sqlx::Database>(rows: usize, columns: usize) -> String {
    let numbered = DB::NAME == "PostgreSQL";
    (0..rows)
        .map(|r| {
            let row: Vec<String> = (1..=columns)
                .map(|c| {
                    if numbered {
                        format!("${}", r * columns + c)
                    } else {
                        "?".to_string()
                    }
                })
                .collect();
            format!("({})", row.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_number_every_value_once() {
        use super::placeholders;
        use sqlx::{Postgres, Sqlite};
        assert_eq!(placeholders::<Postgres>(1, 2), "($1, $2)");
        assert_eq!(placeholders::<Postgres>(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(placeholders::<Sqlite>(2, 2), "(?, ?), (?, ?)");
    }
}
