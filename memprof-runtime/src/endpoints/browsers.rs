//! Web pages of other sites never drive the endpoints. A page the operator has open could otherwise start a
//! day-long run with `<img src="http://127.0.0.1:5050/memory-profiler/start?duration=1days">` (no script
//! needed, and no token is set on loopback by default), or read profiles through DNS rebinding (which the
//! server's `Host` check stops).
//!
//! Browsers say where a request comes from; other clients (curl, the memprof CLI, jeprof, Prometheus,
//! Parca) say nothing and are not concerned. A request is refused (403, saying why) when its
//! `Sec-Fetch-Site` is `cross-site` or `same-site` (a page of another origin), or its `Origin` is not the
//! server's own (`scheme://` + its `Host`). The dashboard page itself holds no data and may be opened from
//! a link anywhere; its own requests are same-origin.

use crate::http::{Fields, HttpError};

/// Refuses a request that a browser made for a page of another origin.
pub(super) fn check(fields: &Fields) -> Result<(), HttpError> {
    let fetched_by_another_site =
        fields.fetch_site.as_deref().is_some_and(|site| matches!(site, "cross-site" | "same-site"));
    let foreign_origin = fields.origin.as_deref().filter(|origin| !same_origin(origin, fields.host.as_deref()));
    if !fetched_by_another_site && foreign_origin.is_none() {
        return Ok(());
    }
    let from =
        foreign_origin.map_or_else(|| "a page of another site".to_owned(), |origin| format!("a page of {origin}"));
    Err(HttpError::new(
        403,
        format!(
            "Refused: the request came from {from}, and web pages of other sites cannot use the heap profiling endpoints; open the dashboard itself, or use curl or the memprof CLI"
        ),
    ))
}

/// Whether `origin` (`http://host:port`) is the server's own, as the request's `host` names it.
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    matches!((authority, host), (Some(authority), Some(host)) if authority.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(host: Option<&str>, origin: Option<&str>, fetch_site: Option<&str>) -> Fields {
        Fields {
            host: host.map(str::to_owned),
            origin: origin.map(str::to_owned),
            fetch_site: fetch_site.map(str::to_owned),
            ..Fields::default()
        }
    }

    #[test]
    fn only_pages_of_other_origins_are_refused() {
        let host = Some("127.0.0.1:5050");
        for allowed in [
            fields(host, None, None),
            fields(None, None, None),
            fields(host, Some("http://127.0.0.1:5050"), Some("same-origin")),
            fields(host, Some("https://127.0.0.1:5050"), None),
            fields(host, None, Some("none")),
        ] {
            assert_eq!(check(&allowed), Ok(()), "{allowed:?}");
        }
        for refused in [
            fields(host, None, Some("cross-site")),
            fields(host, None, Some("same-site")),
            fields(host, Some("http://evil.example"), None),
            fields(Some("rebind.evil.example"), Some("http://evil.example"), Some("same-origin")),
            fields(host, Some("http://127.0.0.1:3000"), Some("same-site")),
            fields(host, Some("null"), None),
            fields(None, Some("http://127.0.0.1:5050"), None),
        ] {
            assert_eq!(check(&refused).map_err(|error| error.status), Err(403), "{refused:?}");
        }
        let message = check(&fields(host, Some("http://evil.example"), None)).unwrap_err().message;
        assert!(message.starts_with("Refused: the request came from a page of http://evil.example, "), "{message}");
    }
}
