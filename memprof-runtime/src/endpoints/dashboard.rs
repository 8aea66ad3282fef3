//! `/memory-profiler/`: one self-contained HTML page (no CDN, no build step; it works on an air-gapped host)
//! that charts memory, drives runs and shows flame graphs, all through the other endpoints (its chart's
//! readings are [`super::readings`]', the growing functions [`super::growing`]'s).

use super::context::Context;
use crate::http::{HttpError, Query, Reply};

/// The page, compiled into the runtime.
const PAGE: &str = include_str!("dashboard.html");

/// `/memory-profiler/`: the dashboard. It holds no data, so it needs no token; it asks for one when the
/// endpoints it calls answer 401.
pub(super) fn page(_: &Context, _: &Query) -> Result<Reply, HttpError> {
    Ok(Reply::bytes("text/html; charset=utf-8", PAGE.as_bytes().to_vec()).with_headers(PAGE_HEADERS))
}

/// The page is never framed (clickjacking its buttons), its type is not guessed, and it loads nothing but
/// its own inline script and style, the endpoints' answers, and the flame graphs and call graphs it shows
/// from `blob:` URLs (whose documents inherit this policy: their inline scripts are the renderers' own).
const PAGE_HEADERS: &[(&str, &str)] = &[
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data: blob:; frame-src blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
];
