//! Statements whose parameters never reach a log.
//!
//! tokio-postgres logs every statement's parameters with their `Debug`
//! text at debug level (through the `log` crate, which a `tracing`
//! subscriber picks up). Parameters carry message text, state and
//! metadata, so every statement of this crate runs through [`Quiet`]: each
//! parameter is wrapped in [`Redacted`], which encodes exactly like the
//! value it wraps but debug-prints as `<redacted>`.

use std::error::Error;
use std::fmt;

use bytes::BytesMut;
use futures::TryStreamExt;
use session_core::SessionError;
use tokio_postgres::types::{Format, IsNull, ToSql, Type};
use tokio_postgres::{Row, ToStatement};

use crate::error::{StoreError, BACKEND};

/// A statement parameter that encodes as its value and logs as `<redacted>`.
pub(crate) struct Redacted<'a>(&'a (dyn ToSql + Sync));

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl ToSql for Redacted<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.0.to_sql_checked(ty, out)
    }

    fn accepts(_: &Type) -> bool {
        // The wrapped value checks its own type in `to_sql_checked`.
        true
    }

    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.0.to_sql_checked(ty, out)
    }

    fn encode_format(&self, ty: &Type) -> Format {
        self.0.encode_format(ty)
    }
}

fn redacted<'a>(
    params: &'a [&'a (dyn ToSql + Sync)],
) -> impl ExactSizeIterator<Item = Redacted<'a>> + Send + Sync + 'a {
    params.iter().map(|p| Redacted(*p))
}

fn row_count(expected: &str, got: usize) -> StoreError {
    StoreError::Session(SessionError::backend(
        BACKEND,
        format!("the statement returned {got} rows; {expected} expected"),
    ))
}

/// `query`, `query_one`, `query_opt` and `execute` with redacted parameters.
pub(crate) trait Quiet {
    /// Every row of a query.
    async fn fetch<T>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError>
    where
        T: ?Sized + ToStatement + Sync + Send;

    /// Runs a statement; returns the number of rows it changed.
    async fn run<T>(&self, stmt: &T, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError>
    where
        T: ?Sized + ToStatement + Sync + Send;

    /// The one row of a query, or an error if there is not exactly one.
    async fn fetch_one<T>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, StoreError>
    where
        T: ?Sized + ToStatement + Sync + Send,
    {
        let mut rows = self.fetch(stmt, params).await?;
        match rows.len() {
            1 => rows.pop().ok_or_else(|| row_count("one", 0)),
            n => Err(row_count("one", n)),
        }
    }

    /// The row of a query if there is one; an error if there are several.
    async fn fetch_opt<T>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError>
    where
        T: ?Sized + ToStatement + Sync + Send,
    {
        let mut rows = self.fetch(stmt, params).await?;
        match rows.len() {
            0 | 1 => Ok(rows.pop()),
            n => Err(row_count("at most one", n)),
        }
    }
}

macro_rules! quiet_for {
    ($($ty:ty),*) => {$(
        impl Quiet for $ty {
            async fn fetch<T>(&self, stmt: &T, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError>
            where
                T: ?Sized + ToStatement + Sync + Send,
            {
                Ok(self.query_raw(stmt, redacted(params)).await?.try_collect().await?)
            }

            async fn run<T>(&self, stmt: &T, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError>
            where
                T: ?Sized + ToStatement + Sync + Send,
            {
                Ok(self.execute_raw(stmt, redacted(params)).await?)
            }
        }
    )*};
}

quiet_for!(tokio_postgres::Client, tokio_postgres::Transaction<'_>);
