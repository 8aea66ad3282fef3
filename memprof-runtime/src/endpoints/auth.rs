//! Optional shared-secret access: with a token set, every request must carry `Authorization: Bearer
//! <token>`, compared in constant time; anything else is 401. Profiles show code addresses and the shape of
//! the heap, and the endpoints can spend CPU and disk: treat them as an admin port.

use subtle::ConstantTimeEq;

use crate::http::HttpError;

/// Checks a request's `Authorization` header against `token`, when there is one.
pub(super) fn check(token: Option<&str>, authorization: Option<&str>) -> Result<(), HttpError> {
    let Some(token) = token else {
        return Ok(());
    };
    // The scheme's name is case-insensitive (RFC 9110 11.1).
    let given = authorization
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
        .map(|(_, token)| token.trim_start());
    match given {
        Some(given) if bool::from(given.as_bytes().ct_eq(token.as_bytes())) => Ok(()),
        Some(_) => Err(HttpError::unauthorized("The token is wrong")),
        None => Err(HttpError::unauthorized(
            "These endpoints need a token: send 'Authorization: Bearer <token>' (memprof --token, or MEMPROF_TOKEN)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_itself_passes() {
        assert!(check(None, None).is_ok());
        for right in ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret"] {
            assert!(check(Some("s3cret"), Some(right)).is_ok(), "{right}");
        }
        for wrong in [None, Some("Bearer s3cre"), Some("s3cret"), Some("Basic s3cret")] {
            assert_eq!(check(Some("s3cret"), wrong).unwrap_err().status, 401, "{wrong:?}");
        }
    }
}
