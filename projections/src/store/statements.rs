//! Pieces of SQL built at run time, the same on both backends but for how they number values.

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
