//! Plain answers: a status with a one-line reason, and the status a file-system error maps to.

use crate::body::{full, ResponseBody};
use fatpipe_net::sandbox::FsError;
use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};
use std::io::ErrorKind;

/// `code` with `reason` as a text body.
pub fn status(code: StatusCode, reason: &str) -> Response<ResponseBody> {
    let mut r = Response::new(full(format!("{reason}\n")));
    *r.status_mut() = code;
    r.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A request refused or failed: the status, a one-line reason, and headers that go with it.
#[derive(Debug)]
pub struct Refused {
    code: StatusCode,
    reason: String,
    headers: Vec<(&'static str, String)>,
}

/// A refusal with `code` and `reason`.
pub fn refuse(code: StatusCode, reason: &str) -> Refused {
    Refused {
        code,
        reason: reason.to_string(),
        headers: Vec::new(),
    }
}

impl Refused {
    /// The same, with header `name: value`.
    pub fn with(mut self, name: &'static str, value: &str) -> Refused {
        self.headers.push((name, value.to_string()));
        self
    }

    /// The answer the client gets.
    pub fn into_response(self) -> Response<ResponseBody> {
        let mut r = status(self.code, &self.reason);
        for (name, value) in self.headers {
            if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
                r.headers_mut().insert(name, v);
            }
        }
        r
    }
}

/// The status a failed file-system operation answers with.
pub fn error_status(e: &FsError) -> StatusCode {
    match e {
        FsError::NotFound => StatusCode::NOT_FOUND,
        FsError::Outside => StatusCode::FORBIDDEN,
        FsError::WrongKind(_) => StatusCode::CONFLICT,
        FsError::Io(io) => match io.kind() {
            ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
            ErrorKind::AlreadyExists => StatusCode::PRECONDITION_FAILED,
            ErrorKind::NotFound => StatusCode::CONFLICT,
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded => StatusCode::INSUFFICIENT_STORAGE,
            ErrorKind::FileTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        },
    }
}
