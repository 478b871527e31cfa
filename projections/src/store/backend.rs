//! What the code shared by both backends asks of a database, said once.
//!
//! The commit path (group commit, the projector's folds, erasure, key writes, the overview) runs
//! the same SQL text on PostgreSQL and SQLite inside one transaction, so it is generic over the
//! backend. sqlx states what a generic caller may bind, read and run as bounds on *other* types
//! (`for<'q> String: Encode<'q, DB>`, `for<'e> &'e mut DB::Connection: Executor<'e>`), and Rust
//! does not carry bounds on other types along with a trait bound: each generic function would
//! repeat a dozen of them. [`Backend`] states them once, in its one implementation (for every
//! database that meets them: PostgreSQL and SQLite), and offers what the generic code does —
//! bind a value, read a column, run a statement — as methods. A generic function says
//! `DB: Backend`, binds with [`Statement::arg`], runs with [`Statement::execute_in`] and the
//! `fetch_*_in` methods, and reads with [`ReadColumn::read`].
//!
//! Values travel as a [`Cell`]: every column type the store writes (text, integers, booleans,
//! JSON, times, bytes), each nullable. A bound value is owned by its cell: a borrowed `&str`,
//! JSON document or byte string is copied once as it is bound (`scripts/bench` compares the
//! commit path before and after; see `docs/benchmarks.md`).
//!
//! A column is read as `Option<T>`; reading SQL NULL into a `T` that has no room for it is an
//! error on both stores (sqlx's SQLite driver alone would read it as 0, `""` or `false`).

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use serde_json::Value;
use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

/// A statement with its arguments, on backend `DB`.
pub(crate) type Query<'q, DB> = sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>;

/// One column's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
    Bool(Option<bool>),
    Json(Option<Value>),
    Time(Option<DateTime<Utc>>),
    Bytes(Option<Vec<u8>>),
}

/// What a column holds, to read it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int,
    Bool,
    Json,
    Time,
    Bytes,
}

impl Cell {
    /// The value as `replay verify` compares it (the rules are in `read_side::columns`'s module
    /// doc), shown in its reports.
    pub fn canonical(&self) -> String {
        match self {
            Cell::Text(Some(s)) => serde_json::to_string(s).unwrap_or_default(),
            Cell::Int(Some(n)) => n.to_string(),
            Cell::Bool(Some(b)) => b.to_string(),
            Cell::Json(Some(v)) => interview_session::hash::canonical_json(v),
            Cell::Time(Some(t)) => interview_session::aggregate::micros(*t)
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            Cell::Bytes(Some(b)) => b.iter().map(|byte| format!("{byte:02x}")).collect(),
            Cell::Text(None)
            | Cell::Int(None)
            | Cell::Bool(None)
            | Cell::Json(None)
            | Cell::Time(None)
            | Cell::Bytes(None) => "null".into(),
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Cell::Text(_) => Kind::Text,
            Cell::Int(_) => Kind::Int,
            Cell::Bool(_) => Kind::Bool,
            Cell::Json(_) => Kind::Json,
            Cell::Time(_) => Kind::Time,
            Cell::Bytes(_) => Kind::Bytes,
        }
    }
}

/// A column named or numbered (from 0), as sqlx reads either.
#[derive(Debug, Clone, Copy)]
pub enum Column<'a> {
    Named(&'a str),
    At(usize),
}

impl std::fmt::Display for Column<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Column::Named(name) => f.write_str(name),
            Column::At(index) => write!(f, "{index}"),
        }
    }
}

impl<'a> From<&'a str> for Column<'a> {
    fn from(name: &'a str) -> Self {
        Column::Named(name)
    }
}

impl From<usize> for Column<'_> {
    fn from(index: usize) -> Self {
        Column::At(index)
    }
}

/// A database the shared code can run on. Implemented for every sqlx database that can bind and
/// decode each [`Cell`] and run statements on a connection: PostgreSQL and SQLite.
pub trait Backend: sqlx::Database {
    /// Binds one value onto `q`.
    fn bind_cell<'q>(q: Query<'q, Self>, cell: Cell) -> Query<'q, Self>;

    /// Reads `column` of `row` as `kind` (SQL NULL as the cell's `None`).
    fn read_cell(row: &Self::Row, column: Column<'_>, kind: Kind) -> Result<Cell, sqlx::Error>;

    /// Runs `q`, answering the rows it affected... as sqlx's result (nothing generic reads it).
    fn execute<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        q: Query<'q, Self>,
    ) -> BoxFuture<'e, Result<Self::QueryResult, sqlx::Error>>;

    fn fetch_all<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        q: Query<'q, Self>,
    ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>>;

    fn fetch_optional<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        q: Query<'q, Self>,
    ) -> BoxFuture<'e, Result<Option<Self::Row>, sqlx::Error>>;

    fn fetch_one<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        q: Query<'q, Self>,
    ) -> BoxFuture<'e, Result<Self::Row, sqlx::Error>>;
}

// The one place the bounds are written: everything the generic code needs of a database.
impl<DB> Backend for DB
where
    DB: sqlx::Database,
    for<'e> &'e mut DB::Connection: Executor<'e, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> Option<String>: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<bool>: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<Value>: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<DateTime<Utc>>: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<Vec<u8>>: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'a> &'a str: ColumnIndex<DB::Row>,
    usize: ColumnIndex<DB::Row>,
{
    fn bind_cell<'q>(q: Query<'q, Self>, cell: Cell) -> Query<'q, Self> {
        match cell {
            Cell::Text(v) => q.bind(v),
            Cell::Int(v) => q.bind(v),
            Cell::Bool(v) => q.bind(v),
            Cell::Json(v) => q.bind(v),
            Cell::Time(v) => q.bind(v),
            Cell::Bytes(v) => q.bind(v),
        }
    }

    fn read_cell(row: &Self::Row, column: Column<'_>, kind: Kind) -> Result<Cell, sqlx::Error> {
        fn get<DB, T>(row: &DB::Row, column: Column<'_>) -> Result<T, sqlx::Error>
        where
            DB: sqlx::Database,
            for<'q> T: Decode<'q, DB> + Type<DB>,
            for<'a> &'a str: ColumnIndex<DB::Row>,
            usize: ColumnIndex<DB::Row>,
        {
            use sqlx::Row;
            match column {
                Column::Named(name) => row.try_get(name),
                Column::At(index) => row.try_get(index),
            }
        }
        Ok(match kind {
            Kind::Text => Cell::Text(get::<DB, _>(row, column)?),
            Kind::Int => Cell::Int(get::<DB, _>(row, column)?),
            Kind::Bool => Cell::Bool(get::<DB, _>(row, column)?),
            Kind::Json => Cell::Json(get::<DB, _>(row, column)?),
            Kind::Time => Cell::Time(get::<DB, _>(row, column)?),
            Kind::Bytes => Cell::Bytes(get::<DB, _>(row, column)?),
        })
    }

    fn execute<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        q: Query<'q, Self>,
    ) -> BoxFuture<'e, Result<Self::QueryResult, sqlx::Error>> {
        conn.execute(q)
    }

    fn fetch_all<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        q: Query<'q, Self>,
    ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>> {
        conn.fetch_all(q)
    }

    fn fetch_optional<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        q: Query<'q, Self>,
    ) -> BoxFuture<'e, Result<Option<Self::Row>, sqlx::Error>> {
        conn.fetch_optional(q)
    }

    fn fetch_one<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        q: Query<'q, Self>,
    ) -> BoxFuture<'e, Result<Self::Row, sqlx::Error>> {
        conn.fetch_one(q)
    }
}

/// A statement bound and run by the shared code: `.arg(value)` binds, `.execute_in(tx)` and the
/// `fetch_*_in(tx)` methods run it in the caller's transaction.
pub(crate) trait Statement<'q, DB: Backend>: Sized {
    fn arg(self, value: impl Into<Cell>) -> Self;
    fn execute_in<'e>(
        self,
        tx: &'e mut sqlx::Transaction<'_, DB>,
    ) -> BoxFuture<'e, Result<DB::QueryResult, sqlx::Error>>
    where
        'q: 'e;
    fn fetch_all_in<'e>(
        self,
        tx: &'e mut sqlx::Transaction<'_, DB>,
    ) -> BoxFuture<'e, Result<Vec<DB::Row>, sqlx::Error>>
    where
        'q: 'e;
    fn fetch_optional_in<'e>(
        self,
        tx: &'e mut sqlx::Transaction<'_, DB>,
    ) -> BoxFuture<'e, Result<Option<DB::Row>, sqlx::Error>>
    where
        'q: 'e;
    fn fetch_one_in<'e>(
        self,
        tx: &'e mut sqlx::Transaction<'_, DB>,
    ) -> BoxFuture<'e, Result<DB::Row, sqlx::Error>>
    where
        'q: 'e;
}

impl<'q, DB: Backend> Statement<'q, DB> for Query<'q, DB> {
    fn arg(self, value: impl Into<Cell>) -> Self {
        DB::bind_cell(self, value.into())
    }

    fn execute_in<'e>(
        self,
        tx: &'e mut sqlx::Transaction<'_, DB>,
    ) -> BoxFuture<'e, Result<DB::QueryResult, sqlx::Error>>
    where
        'q: 'e,
    {
        DB::execute(&mut **tx, self)
    }

    fn fetch_all_in<'e>(
        self,
        tx: &'e mut sqlx::Transaction<'_, DB>,
    ) -> BoxFuture<'e, Result<Vec<DB::Row>, sqlx::Error>>
    where
        'q: 'e,
    {
        DB::fetch_all(&mut **tx, self)
    }

    fn fetch_optional_in<'e>(
        self,
        tx: &'e mut sqlx::Transaction<'_, DB>,
    ) -> BoxFuture<'e, Result<Option<DB::Row>, sqlx::Error>>
    where
        'q: 'e,
    {
        DB::fetch_optional(&mut **tx, self)
    }

    fn fetch_one_in<'e>(
        self,
        tx: &'e mut sqlx::Transaction<'_, DB>,
    ) -> BoxFuture<'e, Result<DB::Row, sqlx::Error>>
    where
        'q: 'e,
    {
        DB::fetch_one(&mut **tx, self)
    }
}

/// A row read by the shared code: `row.read::<i64>("last_seq")`.
pub trait ReadColumn {
    fn read<'a, T: FromCell>(&self, column: impl Into<Column<'a>>) -> Result<T, sqlx::Error>;
    /// The column as a [`Cell`] of `kind`.
    fn read_cell<'a>(&self, column: impl Into<Column<'a>>, kind: Kind)
        -> Result<Cell, sqlx::Error>;
}

impl<R> ReadColumn for R
where
    R: sqlx::Row,
    R::Database: Backend + sqlx::Database<Row = R>,
{
    fn read<'a, T: FromCell>(&self, column: impl Into<Column<'a>>) -> Result<T, sqlx::Error> {
        let column = column.into();
        let cell = <R::Database as Backend>::read_cell(self, column, T::KIND)?;
        T::from_cell(cell).ok_or_else(|| sqlx::Error::ColumnDecode {
            index: column.to_string(),
            source: Box::new(sqlx::error::UnexpectedNullError),
        })
    }

    fn read_cell<'a>(
        &self,
        column: impl Into<Column<'a>>,
        kind: Kind,
    ) -> Result<Cell, sqlx::Error> {
        <R::Database as Backend>::read_cell(self, column.into(), kind)
    }
}

/// A Rust type a [`Cell`] of one [`Kind`] reads into (`Option<T>` reads SQL NULL as `None`).
pub trait FromCell: Sized {
    const KIND: Kind;
    /// The value, or `None` for a NULL where the type has no room for one.
    fn from_cell(cell: Cell) -> Option<Self>;
}

/// `Cell::$variant` holds `Option<$t>`: `$t` binds and reads through it, as does `Option<$t>`.
macro_rules! cell_type {
    ($t:ty, $variant:ident) => {
        impl From<$t> for Cell {
            fn from(value: $t) -> Self {
                Cell::$variant(Some(value))
            }
        }
        impl From<Option<$t>> for Cell {
            fn from(value: Option<$t>) -> Self {
                Cell::$variant(value)
            }
        }
        impl FromCell for Option<$t> {
            const KIND: Kind = Kind::$variant;
            fn from_cell(cell: Cell) -> Option<Self> {
                match cell {
                    Cell::$variant(value) => Some(value),
                    _ => None,
                }
            }
        }
        impl FromCell for $t {
            const KIND: Kind = Kind::$variant;
            fn from_cell(cell: Cell) -> Option<Self> {
                Option::<$t>::from_cell(cell).flatten()
            }
        }
    };
}

cell_type!(String, Text);
cell_type!(i64, Int);
cell_type!(bool, Bool);
cell_type!(Value, Json);
cell_type!(DateTime<Utc>, Time);
cell_type!(Vec<u8>, Bytes);

impl From<&str> for Cell {
    fn from(value: &str) -> Self {
        Cell::Text(Some(value.to_string()))
    }
}

impl From<&String> for Cell {
    fn from(value: &String) -> Self {
        Cell::Text(Some(value.clone()))
    }
}

impl From<&Vec<u8>> for Cell {
    fn from(value: &Vec<u8>) -> Self {
        Cell::Bytes(Some(value.clone()))
    }
}

impl From<&Value> for Cell {
    fn from(value: &Value) -> Self {
        Cell::Json(Some(value.clone()))
    }
}
