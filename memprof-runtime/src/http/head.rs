//! Request heads: parsed from bytes (httparse), checked against the limits, and read for what the server
//! and the endpoints need. Pure: no socket here (the fuzz target `request_head` drives it).

use super::reply::{HttpError, Persistence};

/// The longest request target (path and query) answered.
pub(crate) const MAX_TARGET: usize = 8 << 10;
/// The most header bytes (names and values) answered.
pub(crate) const MAX_HEADERS: usize = 16 << 10;
/// The largest request body read (a symbol lookup of some 50,000 addresses).
pub(crate) const MAX_BODY: usize = 1 << 20;
/// The most header fields parsed.
pub(crate) const MAX_HEADER_FIELDS: usize = 128;
/// The most bytes a request head may take (line, fields, separators).
pub(crate) const MAX_HEAD: usize = MAX_TARGET + MAX_HEADERS + 4 * MAX_HEADER_FIELDS + 64;

/// How the body's end is known.
pub(crate) enum BodyLength {
    Fixed(usize),
    Chunked,
}

/// A parsed request head.
pub(crate) struct Head {
    /// Bytes it took in the buffer.
    pub(crate) length: usize,
    pub(crate) method: String,
    pub(crate) target: String,
    /// The header fields the server and the endpoints read.
    pub(crate) fields: Fields,
    pub(crate) body: BodyLength,
    pub(crate) persistence: Persistence,
    pub(crate) expects_continue: bool,
}

/// The header fields memprof reads, each present at most once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fields {
    /// `Authorization`.
    pub(crate) authorization: Option<String>,
    /// `Host` (HTTP/2's `:authority` on the program's own server).
    pub(crate) host: Option<String>,
    /// `Origin`, which browsers send with cross-origin and state-changing requests.
    pub(crate) origin: Option<String>,
    /// `Sec-Fetch-Site`, which browsers send with every request: `same-origin`, `same-site`, `cross-site`
    /// or `none` (typed in the address bar).
    pub(crate) fetch_site: Option<String>,
}

impl Fields {
    /// Reads the fields from `(name, value)` pairs; a field that must be single but is repeated is 400.
    pub(crate) fn read<'a>(pairs: impl Iterator<Item = (&'a str, &'a [u8])> + Clone) -> Result<Self, HttpError> {
        let single = |name: &str| -> Result<Option<String>, HttpError> {
            let mut values = pairs.clone().filter(|(field, _)| field.eq_ignore_ascii_case(name));
            let first = values.next().map(|(_, value)| String::from_utf8_lossy(value).trim().to_owned());
            if values.next().is_some() {
                return Err(HttpError::bad_request(format!("A request cannot have more than one {name} field")));
            }
            Ok(first)
        };
        Ok(Self {
            authorization: single("Authorization")?,
            host: single("Host")?,
            origin: single("Origin")?,
            fetch_site: single("Sec-Fetch-Site")?,
        })
    }
}

/// 413: a body larger than any endpoint takes.
pub(crate) fn body_too_large() -> HttpError {
    HttpError::new(413, format!("The request body is larger than {MAX_BODY} bytes"))
}

/// 414 while the request line is not even complete, else 431.
pub(crate) fn oversized_head(buffer: &[u8]) -> HttpError {
    if buffer.contains(&b'\n') { headers_too_large() } else { target_too_long() }
}

pub(crate) fn target_too_long() -> HttpError {
    HttpError::new(414, format!("The request target is longer than {MAX_TARGET} bytes"))
}

pub(crate) fn headers_too_large() -> HttpError {
    HttpError::new(431, format!("The request headers are larger than {MAX_HEADERS} bytes"))
}

pub(crate) fn too_many_fields() -> HttpError {
    HttpError::new(431, format!("The request has more than {MAX_HEADER_FIELDS} header fields"))
}

/// Parses a request head from the start of `buffer`; `None` while it is incomplete.
pub(crate) fn parse_head(buffer: &[u8]) -> Result<Option<Head>, HttpError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADER_FIELDS];
    let mut request = httparse::Request::new(&mut fields);
    let length = match request.parse(buffer) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(too_many_fields()),
        Err(error) => return Err(HttpError::bad_request(format!("Malformed request ({error})"))),
    };
    let target = origin_form(request.path.unwrap_or_default());
    if target.len() > MAX_TARGET {
        return Err(target_too_long());
    }
    if request.headers.iter().map(|field| field.name.len() + field.value.len()).sum::<usize>() > MAX_HEADERS {
        return Err(headers_too_large());
    }
    let pairs = request.headers.iter().map(|field| (field.name, field.value));
    let read = Fields::read(pairs)?;
    let http_1_1 = request.version == Some(1);
    let values = |name: &str| -> Vec<String> {
        let matching = request.headers.iter().filter(|field| field.name.eq_ignore_ascii_case(name));
        matching.map(|field| String::from_utf8_lossy(field.value).trim().to_owned()).collect()
    };
    let has_token = |name: &str, token: &str| {
        values(name).iter().any(|value| value.split(',').any(|part| part.trim().eq_ignore_ascii_case(token)))
    };
    // A request whose body's end two parties could read differently is refused: behind a proxy that reads
    // it the other way, the rest would be taken for a second request (request smuggling, RFC 9112 6.3).
    let codings = values("transfer-encoding");
    let lengths = values("content-length");
    let body = match (codings.as_slice(), lengths.as_slice()) {
        ([_, ..], [_, ..]) => {
            return Err(HttpError::bad_request("A request cannot have both Transfer-Encoding and Content-Length"));
        }
        ([_, _, ..], []) => {
            return Err(HttpError::bad_request("A request cannot have more than one Transfer-Encoding"));
        }
        ([], [_, _, ..]) => return Err(HttpError::bad_request("A request cannot have more than one Content-Length")),
        ([coding], []) if coding.eq_ignore_ascii_case("chunked") => BodyLength::Chunked,
        ([coding], []) => {
            return Err(HttpError::new(501, format!("Transfer-Encoding '{coding}' is not supported; use chunked")));
        }
        ([], [length]) => match parse_content_length(length) {
            Some(length) if length > MAX_BODY => return Err(body_too_large()),
            Some(length) => BodyLength::Fixed(length),
            None => return Err(HttpError::bad_request(format!("Invalid Content-Length '{length}'"))),
        },
        ([], []) => BodyLength::Fixed(0),
    };
    let persistence = match request.version {
        Some(1) if has_token("connection", "close") => Persistence::Close,
        Some(1) => Persistence::KeepAlive,
        // RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding is faulty framing; close after it.
        _ if !codings.is_empty() => Persistence::Close,
        _ if has_token("connection", "keep-alive") => Persistence::KeepAliveSaid,
        _ => Persistence::Close,
    };
    // RFC 9112 3.2: an HTTP/1.1 request has exactly one Host (`Fields::read` refuses repeats).
    if http_1_1 && read.host.is_none() {
        return Err(HttpError::bad_request("An HTTP/1.1 request must have a Host field"));
    }
    Ok(Some(Head {
        length,
        method: request.method.unwrap_or_default().to_owned(),
        target: target.to_owned(),
        fields: read,
        body,
        persistence,
        expects_continue: http_1_1 && has_token("expect", "100-continue"),
    }))
}

/// `Content-Length`: digits only (`+5`, ` 5` or `0x5` are refused, which `str::parse` would not all do).
fn parse_content_length(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().or(Some(usize::MAX))
}

/// The path and query of a target in absolute form (`http://host/path?query`, which servers must accept).
fn origin_form(target: &str) -> &str {
    let Some(rest) = target.strip_prefix("http://").or_else(|| target.strip_prefix("https://")) else {
        return target;
    };
    rest.find('/').map_or("/", |path| &rest[path..])
}

/// The end of the first line in `buffer`, as the head parser ends lines (`\r\n`, or a bare `\n`): the
/// line's length without its ending, and the length with it.
pub(crate) fn line_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let newline = buffer.iter().position(|&byte| byte == b'\n')?;
    let content = if newline > 0 && buffer[newline - 1] == b'\r' { newline - 1 } else { newline };
    Some((content, newline + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `raw` with a `Host` field after its request line, when it is HTTP/1.1 and has none.
    fn with_host(raw: &str) -> String {
        match raw.split_once("HTTP/1.1\r\n") {
            Some((line, rest)) if !raw.to_ascii_lowercase().contains("\nhost:") => {
                format!("{line}HTTP/1.1\r\nHost: x\r\n{rest}")
            }
            _ => raw.to_owned(),
        }
    }

    fn head(raw: &str) -> Head {
        parse_head(with_host(raw).as_bytes()).unwrap().unwrap()
    }

    fn refusal(raw: &str) -> (u16, String) {
        match parse_head(with_host(raw).as_bytes()) {
            Err(error) => (error.status, error.message),
            Ok(_) => panic!("accepted: {raw}"),
        }
    }

    #[test]
    fn heads_say_how_the_body_ends_and_whether_the_connection_stays() {
        let get = head("GET /memory-profiler/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n");
        assert_eq!((get.method.as_str(), get.target.as_str()), ("GET", "/memory-profiler/state"));
        assert_eq!((get.fields.authorization.as_deref(), get.persistence), (Some("Bearer t"), Persistence::KeepAlive));
        assert!(matches!(get.body, BodyLength::Fixed(0)));
        let post = head("POST /s HTTP/1.1\r\ncontent-length: 12\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n");
        assert!(matches!(post.body, BodyLength::Fixed(12)) && post.expects_continue);
        assert_eq!(post.persistence, Persistence::Close);
        assert_eq!(head("GET / HTTP/1.0\r\n\r\n").persistence, Persistence::Close);
        let kept = head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert_eq!(kept.persistence, Persistence::KeepAliveSaid);
        let chunked = head("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(matches!(chunked.body, BodyLength::Chunked));
        assert!(parse_head(b"GET /memory-profiler/state HTTP/1.1\r\nHost:").unwrap().is_none());
        let absolute = head("GET http://127.0.0.1:5050/memory-profiler/state?x=1 HTTP/1.1\r\n\r\n");
        assert_eq!(absolute.target, "/memory-profiler/state?x=1");
        assert_eq!(head("GET http://host HTTP/1.1\r\n\r\n").target, "/");
    }

    #[test]
    fn bad_heads_get_their_status() {
        assert_eq!(
            refusal("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            (400, "Invalid Content-Length '-1'".into())
        );
        assert_eq!(refusal("GET / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n").0, 413);
        assert_eq!(refusal("GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").0, 501);
        assert_eq!(
            refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
            (400, "A request cannot have both Transfer-Encoding and Content-Length".into())
        );
        assert_eq!(
            refusal("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"),
            (400, "A request cannot have more than one Content-Length".into())
        );
        assert_eq!(
            refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
            (400, "A request cannot have more than one Transfer-Encoding".into())
        );
        for length in ["+5", "0x5", "5 5", "", "5.0"] {
            let request = format!("POST / HTTP/1.1\r\nContent-Length: {length}\r\n\r\n");
            assert_eq!(refusal(&request), (400, format!("Invalid Content-Length '{length}'")), "{length:?}");
        }
        assert_eq!(refusal(&format!("POST / HTTP/1.1\r\nContent-Length: {}0\r\n\r\n", usize::MAX)).0, 413);
        assert_eq!(refusal("GET\x01 / HTTP/1.1\r\n\r\n"), (400, "Malformed request (invalid token)".into()));
        let many: String = (0..200).map(|index| format!("X-{index}: y\r\n")).collect();
        assert_eq!(refusal(&format!("GET / HTTP/1.1\r\n{many}\r\n")).0, 431);
        assert_eq!(refusal(&format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_TARGET))).0, 414);
        assert_eq!(
            refusal(&format!("GET / HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(MAX_HEADER_FIELDS + 1))),
            (431, format!("The request has more than {MAX_HEADER_FIELDS} header fields"))
        );
        assert_eq!(oversized_head(b"GET /aaaa").status, 414);
        assert_eq!(oversized_head(b"GET / HTTP/1.1\r\nX: aaaa").status, 431);
    }

    #[test]
    fn host_and_authorization_are_single_and_http_1_1_needs_a_host() {
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\n\r\n").err().unwrap(),
            HttpError::bad_request("An HTTP/1.1 request must have a Host field")
        );
        assert!(parse_head(b"GET / HTTP/1.0\r\n\r\n").unwrap().is_some(), "HTTP/1.0 has no Host");
        for name in ["Host", "Authorization", "Origin", "Sec-Fetch-Site"] {
            let raw = format!("GET / HTTP/1.1\r\nHost: a\r\n{name}: b\r\n{name}: c\r\n\r\n");
            let raw = if name == "Host" { raw.replacen("Host: a\r\n", "", 1) } else { raw };
            assert_eq!(refusal(&raw), (400, format!("A request cannot have more than one {name} field")), "{name}");
        }
        let browser = head(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:5050\r\nOrigin: http://e.example\r\nSec-Fetch-Site: cross-site\r\n\r\n",
        );
        assert_eq!(browser.fields.host.as_deref(), Some("127.0.0.1:5050"));
        assert_eq!(browser.fields.origin.as_deref(), Some("http://e.example"));
        assert_eq!(browser.fields.fetch_site.as_deref(), Some("cross-site"));
    }

    #[test]
    fn an_http_1_0_request_with_transfer_encoding_closes_the_connection_after_it() {
        let request = head("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n");
        assert!(matches!(request.body, BodyLength::Chunked));
        assert_eq!(request.persistence, Persistence::Close);
    }

    #[test]
    fn lines_end_with_crlf_or_a_bare_lf_as_in_heads() {
        assert_eq!(line_end(b"a: b\r\nrest"), Some((4, 6)));
        assert_eq!(line_end(b"a: b\nrest"), Some((4, 5)));
        assert_eq!(line_end(b"\nGET"), Some((0, 1)));
        assert_eq!(line_end(b"a: b"), None);
    }
}
