//! Optional shared-secret access: with a token set, every request must carry `Authorization: Bearer
//! <token>`, compared in constant time; anything else is 401. Profiles show code addresses and the shape of
//! the heap, and the endpoints can spend CPU and disk: treat them as an admin port.

use std::sync::OnceLock;
use subtle::ConstantTimeEq;

use super::reply::HttpError;

static TOKEN: OnceLock<Option<String>> = OnceLock::new();

/// Sets the token (once, when the endpoints start); an empty token counts as none.
pub(crate) fn require(token: Option<String>) {
    let _ = TOKEN.set(token.filter(|token| !token.is_empty()));
}

/// Whether requests need the token.
pub(crate) fn required() -> bool {
    TOKEN.get().is_some_and(Option::is_some)
}

/// Checks a request's `Authorization` header.
pub(crate) fn check(authorization: Option<&str>) -> Result<(), HttpError> {
    let Some(Some(token)) = TOKEN.get() else {
        return Ok(());
    };
    let given = authorization.and_then(|value| value.strip_prefix("Bearer "));
    match given {
        Some(given) if bool::from(given.as_bytes().ct_eq(token.as_bytes())) => Ok(()),
        Some(_) => Err(HttpError::unauthorized("The token is wrong")),
        None => Err(HttpError::unauthorized(
            "These endpoints need a token: send 'Authorization: Bearer <token>' (memprof --token, or MEMPROF_TOKEN)",
        )),
    }
}
