//! Reading JSON request bodies with our own errors: over the size limit → 413, not JSON → 400,
//! JSON of the wrong shape → 400 naming the field (or 422 where the caller says so); text holding
//! U+0000 → 422 `invalid_text` naming the field.

use actix_web::web;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::http::error::ApiError;

/// Reads the whole body, refusing more than `limit` bytes.
pub async fn read_bytes(payload: web::Payload, limit: usize) -> Result<web::BytesMut, ApiError> {
    collect(payload, limit, |_| Ok(())).await
}

/// Reads a body stream to its end, refusing more than `limit` bytes; `admit` is asked about
/// each chunk's size before it is kept (the door's body budget).
pub async fn collect<S>(
    mut payload: S,
    limit: usize,
    mut admit: impl FnMut(usize) -> Result<(), ApiError>,
) -> Result<web::BytesMut, ApiError>
where
    S: futures_util::Stream<Item = Result<web::Bytes, actix_web::error::PayloadError>> + Unpin,
{
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadRequest {
            code: "invalid_body",
            message: format!("the request body could not be read: {e}"),
            details: None,
        })?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::PayloadTooLarge {
                what: "request body",
                limit,
            });
        }
        admit(chunk.len())?;
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// How a shape error (valid JSON, wrong fields) is answered.
#[derive(Clone, Copy)]
pub enum ShapeErrors {
    /// 400 `invalid_body` with `details.field`.
    BadRequest,
    /// 422 `invalid_definition` with `details.field`.
    Unprocessable,
}

/// Parses `bytes` as JSON into `T`. An empty body parses as `{}` when `empty_ok`.
pub fn parse_json<T: DeserializeOwned>(
    bytes: &[u8],
    empty_ok: bool,
    shape: ShapeErrors,
) -> Result<T, ApiError> {
    let bytes: &[u8] = if empty_ok && bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest {
            code: "invalid_json",
            message: format!("the request body is not valid JSON: {e}"),
            details: None,
        })?;
    if let Some(field) = nul_in(&value, String::new()) {
        return Err(ApiError::invalid(
            "invalid_text",
            field,
            "text may not contain the NUL character (U+0000)",
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        let message = e.into_inner().to_string();
        match shape {
            ShapeErrors::BadRequest => ApiError::BadRequest {
                code: "invalid_body",
                message: format!("the request body is not valid: {message}"),
                details: Some(json!({ "field": field })),
            },
            ShapeErrors::Unprocessable => ApiError::invalid("invalid_definition", field, message),
        }
    })
}

/// The path (`objectives[1].id`, as serde_path_to_error writes it) of the first string or key
/// holding U+0000. PostgreSQL cannot store that character in text or JSON columns, so it is
/// refused at the door on both stores alike.
fn nul_in(value: &serde_json::Value, path: String) -> Option<String> {
    use serde_json::Value;
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::String(s) => s.contains('\0').then_some(path),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_in(v, format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                Some(join(&k.replace('\0', "\\u0000")))
            } else {
                nul_in(v, join(k))
            }
        }),
        _ => None,
    }
}

/// Reads and parses a JSON body in one step.
pub async fn json_body<T: DeserializeOwned>(
    payload: web::Payload,
    limit: usize,
    empty_ok: bool,
    shape: ShapeErrors,
) -> Result<T, ApiError> {
    let bytes = read_bytes(payload, limit).await?;
    parse_json(&bytes, empty_ok, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_anywhere_is_found_and_named() {
        for (body, field) in [
            (r#"{"content":"a\u0000b"}"#, "content"),
            (
                r#"{"client_context":{"x":["ok","\u0000"]}}"#,
                "client_context.x[1]",
            ),
            (
                r#"{"objectives":[{"id":"a"},{"id":"b\u0000"}]}"#,
                "objectives[1].id",
            ),
            (r#"{"k\u0000":1}"#, "k\\u0000"),
        ] {
            let value: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(
                nul_in(&value, String::new()).as_deref(),
                Some(field),
                "{body}"
            );
        }
        let clean: serde_json::Value = serde_json::from_str(r#"{"a":["b",{"c":"d"}]}"#).unwrap();
        assert_eq!(nul_in(&clean, String::new()), None);
    }
}
