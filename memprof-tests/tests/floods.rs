//! The example service under a flood of clients: `state` and `stop` answer every single try.

use std::sync::atomic::{AtomicBool, Ordering};

use memprof_tests::http::try_get;
use memprof_tests::process::Program;

/// 64 clients cycle start, stop and state on fresh connections (twice the server's places): an operator's
/// single `state` or `stop` is answered every time, and no request on its way is thrown out for another.
#[test]
fn state_and_stop_answer_every_single_try_under_a_flood_of_clients() {
    let service = Program::service().spawn();
    let address = service.address();
    let flooding = AtomicBool::new(true);
    let thrown_out = std::sync::Mutex::new(Vec::new());
    let probes: Vec<(&str, Option<u16>)> = std::thread::scope(|scope| {
        for _ in 0..64 {
            scope.spawn(|| {
                while flooding.load(Ordering::Relaxed) {
                    for target in
                        ["/memory-profiler/start?duration=1hrs", "/memory-profiler/stop", "/memory-profiler/state"]
                    {
                        let answer = try_get(address, target).map(|response| response.text());
                        if answer.as_deref().is_some_and(|text| text.contains("closed to make room")) {
                            thrown_out.lock().unwrap().push(answer);
                        }
                    }
                }
            });
        }
        let probes = (0..40)
            .map(|turn| {
                let target = if turn % 2 == 0 { "/memory-profiler/state" } else { "/memory-profiler/stop" };
                (target, try_get(address, target).map(|response| response.status))
            })
            .collect();
        flooding.store(false, Ordering::Relaxed);
        probes
    });
    for (target, status) in probes {
        // `stop` with no run active is 409; with one, 200: either way answered, never 503.
        let answered = if target.ends_with("state") { status == Some(200) } else { matches!(status, Some(200 | 409)) };
        assert!(answered, "{target}: {status:?}");
    }
    assert_eq!(thrown_out.into_inner().unwrap(), Vec::<Option<String>>::new());
}
