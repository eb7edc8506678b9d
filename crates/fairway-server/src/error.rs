//! API errors: a status code, a stable `error` code and a human message, as JSON.

use crate::wire::ErrorBody;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error answer of the HTTP API: `{error, message}` with a stable code (see `docs/api.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable machine-readable code.
    pub code: &'static str,
    /// What went wrong, for a human; names the field when a field is at fault.
    pub message: String,
    /// Seconds for a `Retry-After` header.
    pub retry_after_s: Option<u64>,
    /// The job's authoritative epoch, for `stale_epoch`.
    pub current_epoch: Option<u64>,
}

impl ApiError {
    /// An error with a status, a code and a message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after_s: None,
            current_epoch: None,
        }
    }

    /// 400 `malformed_json`.
    pub fn malformed_json(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", message)
    }

    /// 422 `invalid`: a field is unknown, missing or has a bad value.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message)
    }

    /// 413 `too_large`.
    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// 404 `unknown_job`.
    pub fn unknown_job(id: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_job",
            format!("no job {id:?}"),
        )
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 429 `busy`, retry after a second.
    pub fn busy(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after_s: Some(1),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "busy", message)
        }
    }

    /// 503 `not_ready`: the server is still recovering.
    pub fn not_ready() -> ApiError {
        ApiError {
            retry_after_s: Some(1),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                "the server is recovering its state; retry shortly",
            )
        }
    }

    /// 503 `unavailable`: the writer stopped, the store failed, or the request timed out.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after_s: Some(1),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
        }
    }

    /// 409 `stale_epoch`.
    pub fn stale_epoch(message: impl Into<String>, current: u64) -> ApiError {
        ApiError {
            current_epoch: Some(current),
            ..ApiError::new(StatusCode::CONFLICT, "stale_epoch", message)
        }
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.code.to_string(),
            message: self.message.clone(),
            current_epoch: self.current_epoch,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(s) = self.retry_after_s {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The body may be left unread, so the server closes the connection after this
            // answer; saying so keeps the client from sending its next request down it.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}
