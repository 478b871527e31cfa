//! Query strings with our own errors: `Query<T>` is actix-web's `web::Query` except that a bad
//! value answers 400 `invalid_query` naming the parameter in `details.field`.

use std::future::{ready, Ready};

use actix_web::{dev::Payload, FromRequest, HttpRequest};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::http::error::ApiError;

/// The request's query string as `T`.
pub struct Query<T>(pub T);

impl<T> std::ops::Deref for Query<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Parses a query string into `T`, naming the parameter that does not fit.
pub fn parse<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let deserializer =
        serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        let message = e.into_inner().to_string();
        ApiError::BadRequest {
            code: "invalid_query",
            message: if field.is_empty() {
                format!("the query string is not valid: {message}")
            } else {
                format!("the query parameter {field} is not valid: {message}")
            },
            details: Some(json!({ "field": field })),
        }
    })
}

impl<T: DeserializeOwned> FromRequest for Query<T> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(parse(req.query_string()).map(Query))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Page {
        limit: Option<i64>,
        #[serde(default)]
        include_preview: bool,
    }

    #[test]
    fn a_bad_value_names_its_parameter() {
        for (query, field) in [
            ("limit=abc", "limit"),
            ("limit=99999999999999999999", "limit"),
            ("include_preview=maybe", "include_preview"),
        ] {
            let Err(ApiError::BadRequest { code, details, .. }) = parse::<Page>(query) else {
                panic!("{query} parsed");
            };
            assert_eq!(code, "invalid_query");
            assert_eq!(details.unwrap()["field"], field, "{query}");
        }
        assert_eq!(parse::<Page>("limit=5").unwrap().limit, Some(5));
    }
}
