use super::*;

fn partial(rejected: i64, message: &str) -> Vec<u8> {
    ExportResponse {
        partial_success: Some(PartialSuccess { rejected_profiles: rejected, error_message: message.into() }),
    }
    .encode_to_vec()
}

#[test]
fn success_reads_the_partial_success_and_an_empty_body_is_whole_success() {
    let now = SystemTime::UNIX_EPOCH;
    assert_eq!(judge(200, None, b"", now), Answer::Accepted { rejected: 0, message: String::new() });
    assert_eq!(
        judge(200, None, &partial(2, "two profiles had no samples"), now),
        Answer::Accepted { rejected: 2, message: "two profiles had no samples".into() }
    );
    // A body that is not the response (a proxy's page) is still a success.
    assert_eq!(judge(202, None, b"<html>ok</html>", now), Answer::Accepted { rejected: 0, message: String::new() });
}

#[test]
fn throttling_and_unavailability_are_retried_after_the_servers_word() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    for status in [429, 502, 503, 504] {
        assert!(matches!(judge(status, None, b"", now), Answer::Retry { after: None, .. }), "{status}");
    }
    let Answer::Retry { after, why } = judge(503, Some("7"), b"busy", now) else { panic!() };
    assert_eq!((after, why.as_str()), (Some(Duration::from_secs(7)), "the collector answered 503 busy"));
    let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
    assert_eq!(
        judge(429, Some(&date), b"", now),
        Answer::Retry { after: Some(Duration::from_secs(30)), why: "the collector answered 429 ".into() }
    );
    // A date past, a wait of days, a value that is neither: now, five minutes, the backoff's own.
    let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
    assert!(matches!(judge(429, Some(&past), b"", now), Answer::Retry { after: Some(Duration::ZERO), .. }));
    assert!(matches!(judge(429, Some("999999"), b"", now), Answer::Retry { after: Some(MOST_RETRY_AFTER), .. }));
    assert!(matches!(judge(429, Some("soon"), b"", now), Answer::Retry { after: None, .. }));
}

#[test]
fn a_bad_request_and_other_statuses_are_refused_for_good_with_what_the_server_said() {
    let now = SystemTime::UNIX_EPOCH;
    assert_eq!(
        judge(400, None, b"proto: cannot parse invalid wire-format data\n", now),
        Answer::Refused {
            why: "the collector refused the export: 400 proto: cannot parse invalid wire-format data".into()
        }
    );
    for status in [301, 401, 404, 413, 500] {
        assert!(matches!(judge(status, Some("1"), b"", now), Answer::Refused { .. }), "{status}");
    }
    // What the server says is shown escaped and cut.
    let Answer::Refused { why } = judge(400, None, &[b"\x1b[2J".as_slice(), &[b'x'; 2000]].concat(), now) else {
        panic!()
    };
    assert!(!why.contains('\x1b') && why.len() < 600, "{why}");
}
