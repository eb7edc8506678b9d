//! What can go wrong with a call, typed by what the caller should do about it.

use crate::types::{ErrorBody, PolicyError};
use std::fmt;
use std::time::Duration;

/// A failed call.
///
/// The variants follow what a caller does next: wait and try again ([`Error::Rejected`] with
/// `retryable`, [`Error::Transport`]), stop the attempt ([`Error::StaleEpoch`]), give up on an
/// id ([`Error::NotFound`]), fix the input ([`Error::InvalidPolicy`], most
/// [`Error::Http`]).
#[derive(Debug)]
pub enum Error {
    /// The server refused the request: admission refused a job (`rejected_retryable` /
    /// `rejected_final`), or the server is too busy to take the request now (any 429).
    Rejected {
        /// Whether the same request may succeed later.
        retryable: bool,
        /// A stable code (`over_quota`, `unknown_class`, `busy`, ...).
        reason: String,
        /// A human explanation.
        message: String,
        /// How long the server asked the caller to wait (`retry_after_ms` or `Retry-After`).
        retry_after: Option<Duration>,
    },
    /// 409 `stale_epoch`: the epoch presented is not the job's authoritative one, so this
    /// attempt is no longer the caller's; nothing changed on the server.
    StaleEpoch {
        /// The job's authoritative epoch, when the server said.
        current: Option<u64>,
    },
    /// 404: no such job (or no such route, from a server that predates it).
    NotFound {
        /// The server's message.
        message: String,
    },
    /// 422 `invalid_policy`: the policy text was refused and the prior version stays.
    InvalidPolicy {
        /// The server's summary.
        message: String,
        /// Every error found, with its line and key.
        errors: Vec<PolicyError>,
    },
    /// Any other error reply (400 malformed_json, 401 unauthorized, 403 forbidden, 413
    /// too_large, 422 invalid, 503 not_ready, ...).
    Http {
        /// The HTTP status.
        status: u16,
        /// The reply's stable `error` code (empty when the body had none).
        code: String,
        /// The reply's message.
        message: String,
    },
    /// The request did not get an answer: connection refused or reset, a timeout. Whether the
    /// server acted on it is unknown; see [`Client::submit_with_retry`](crate::Client::submit_with_retry)
    /// for why resubmitting the same job id is safe.
    Transport(reqwest::Error),
    /// The server answered, but not in the contract's shape (a proxy's page, another service).
    Protocol {
        /// The HTTP status of the reply.
        status: u16,
        /// What did not match.
        message: String,
    },
    /// The call was not made: its input is wrong on the client's side (a base URL that is not
    /// `http://`, a batch over [`MAX_BATCH`](crate::MAX_BATCH)).
    Invalid(String),
}

impl Error {
    /// Whether the same request may succeed if tried again later: a retryable rejection
    /// (429), a transport failure, or a server not ready yet (503).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Rejected { retryable, .. } => *retryable,
            Error::Transport(_) => true,
            Error::Http { status, .. } => *status == 503,
            _ => false,
        }
    }

    /// A copy of an error that is an answer (every kind but [`Error::Transport`], which has no
    /// answer to copy), for each caller whose job a coalesced request carried.
    pub(crate) fn copy_answer(&self) -> Option<Error> {
        Some(match self {
            Error::Rejected {
                retryable,
                reason,
                message,
                retry_after,
            } => Error::Rejected {
                retryable: *retryable,
                reason: reason.clone(),
                message: message.clone(),
                retry_after: *retry_after,
            },
            Error::StaleEpoch { current } => Error::StaleEpoch { current: *current },
            Error::NotFound { message } => Error::NotFound {
                message: message.clone(),
            },
            Error::InvalidPolicy { message, errors } => Error::InvalidPolicy {
                message: message.clone(),
                errors: errors.clone(),
            },
            Error::Http {
                status,
                code,
                message,
            } => Error::Http {
                status: *status,
                code: code.clone(),
                message: message.clone(),
            },
            Error::Transport(_) => return None,
            Error::Protocol { status, message } => Error::Protocol {
                status: *status,
                message: message.clone(),
            },
            Error::Invalid(message) => Error::Invalid(message.clone()),
        })
    }

    /// How long the server asked to wait before trying again, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Rejected { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Builds the error for a non-success reply `status` whose body is `body` (raw bytes, not
    /// necessarily JSON) and whose `Retry-After` header said `retry_after`.
    pub(crate) fn from_reply(status: u16, body: &[u8], retry_after: Option<Duration>) -> Error {
        // An admission refusal carries `outcome`; every other error carries `error`.
        if let Ok(reply) = serde_json::from_slice::<crate::SubmitReply>(body) {
            match reply {
                crate::SubmitReply::RejectedRetryable {
                    reason,
                    message,
                    retry_after_ms,
                } => {
                    return Error::Rejected {
                        retryable: true,
                        reason,
                        message,
                        retry_after: Some(Duration::from_millis(retry_after_ms)).or(retry_after),
                    };
                }
                crate::SubmitReply::RejectedFinal { reason, message } => {
                    return Error::Rejected {
                        retryable: false,
                        reason,
                        message,
                        retry_after: None,
                    };
                }
                // A success outcome with an error status is not the contract.
                _ => {
                    return Error::Protocol {
                        status,
                        message: format!(
                            "status {status} with a success outcome: {}",
                            String::from_utf8_lossy(body)
                        ),
                    };
                }
            }
        }
        let body: ErrorBody = match serde_json::from_slice(body) {
            Ok(body) => body,
            Err(_) => ErrorBody {
                error: String::new(),
                message: snippet(body),
                ..ErrorBody::default()
            },
        };
        Error::from_body(status, body, retry_after)
    }

    /// Builds the error for a decoded error body.
    pub(crate) fn from_body(status: u16, body: ErrorBody, retry_after: Option<Duration>) -> Error {
        match (status, body.error.as_str()) {
            (_, "stale_epoch") => Error::StaleEpoch {
                current: body.current_epoch,
            },
            (404, _) | (_, "unknown_job") => Error::NotFound {
                message: body.message,
            },
            (_, "invalid_policy") => Error::InvalidPolicy {
                message: body.message,
                errors: body.errors,
            },
            (429, _) => Error::Rejected {
                retryable: true,
                reason: if body.error.is_empty() {
                    "busy".to_string()
                } else {
                    body.error
                },
                message: body.message,
                retry_after,
            },
            _ => Error::Http {
                status,
                code: body.error,
                message: body.message,
            },
        }
    }
}

/// The start of a non-JSON body, for a message.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rejected {
                retryable,
                reason,
                message,
                retry_after,
            } => {
                let kind = if *retryable {
                    "rejected (retryable)"
                } else {
                    "rejected"
                };
                write!(f, "{kind}: {reason}")?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                if let Some(after) = retry_after {
                    write!(f, " (retry after {} ms)", after.as_millis())?;
                }
                Ok(())
            }
            Error::StaleEpoch { current: Some(c) } => {
                write!(f, "stale epoch: the job's authoritative epoch is {c}")
            }
            Error::StaleEpoch { current: None } => write!(f, "stale epoch"),
            Error::NotFound { message } if message.is_empty() => write!(f, "not found"),
            Error::NotFound { message } => write!(f, "not found: {message}"),
            Error::InvalidPolicy { message, errors } => {
                write!(f, "invalid policy: {message}")?;
                for e in errors {
                    write!(f, "\n  ")?;
                    if let Some(line) = e.line {
                        write!(f, "line {line}: ")?;
                    }
                    if let Some(key) = &e.key {
                        write!(f, "key `{key}`: ")?;
                    }
                    write!(f, "{}", e.message)?;
                }
                Ok(())
            }
            Error::Http {
                status,
                code,
                message,
            } => {
                write!(f, "HTTP {status}")?;
                if !code.is_empty() {
                    write!(f, " {code}")?;
                }
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            Error::Transport(e) => {
                write!(f, "transport: {e}")?;
                // reqwest's top-level message is terse ("error sending request"); the cause
                // (connection refused, timed out) is what a user needs.
                let mut source = std::error::Error::source(e);
                while let Some(s) = source {
                    write!(f, ": {s}")?;
                    source = s.source();
                }
                Ok(())
            }
            Error::Protocol { status, message } => {
                write!(f, "unexpected reply (HTTP {status}): {message}")
            }
            Error::Invalid(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Transport(e) => Some(e),
            _ => None,
        }
    }
}

impl From<reqwest::Error> for Error {
    fn from(e: reqwest::Error) -> Error {
        Error::Transport(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_replies_map_to_the_variant_a_caller_acts_on() {
        let e = Error::from_reply(
            429,
            br#"{"outcome":"rejected_retryable","reason":"over_quota","message":"m","retry_after_ms":1500}"#,
            Some(Duration::from_secs(2)),
        );
        assert!(matches!(
            &e,
            Error::Rejected { retryable: true, reason, retry_after: Some(d), .. }
                if reason == "over_quota" && *d == Duration::from_millis(1500)
        ));
        assert!(e.is_retryable());

        let e = Error::from_reply(
            403,
            br#"{"outcome":"rejected_final","reason":"forbidden_class","message":"m"}"#,
            None,
        );
        assert!(
            matches!(&e, Error::Rejected { retryable: false, reason, .. } if reason == "forbidden_class")
        );
        assert!(!e.is_retryable());

        let e = Error::from_reply(
            429,
            br#"{"error":"busy","message":"writer queue full"}"#,
            Some(Duration::from_secs(1)),
        );
        assert!(matches!(
            &e,
            Error::Rejected { retryable: true, reason, retry_after: Some(d), .. }
                if reason == "busy" && *d == Duration::from_secs(1)
        ));

        let e = Error::from_reply(
            409,
            br#"{"error":"stale_epoch","message":"m","current_epoch":5}"#,
            None,
        );
        assert!(matches!(e, Error::StaleEpoch { current: Some(5) }));

        let e = Error::from_reply(
            404,
            br#"{"error":"unknown_job","message":"no job x"}"#,
            None,
        );
        assert!(matches!(&e, Error::NotFound { message } if message == "no job x"));

        let e = Error::from_reply(
            422,
            br#"{"error":"invalid_policy","message":"1 error","errors":[{"line":2,"key":"k","message":"bad"}]}"#,
            None,
        );
        assert!(matches!(&e, Error::InvalidPolicy { errors, .. } if errors[0].line == Some(2)));

        let e = Error::from_reply(401, br#"{"error":"unauthorized","message":"token"}"#, None);
        assert!(matches!(&e, Error::Http { status: 401, code, .. } if code == "unauthorized"));

        let e = Error::from_reply(502, b"<html>Bad Gateway</html>", None);
        assert!(
            matches!(&e, Error::Http { status: 502, code, message } if code.is_empty() && message.contains("Bad Gateway"))
        );
    }
}
