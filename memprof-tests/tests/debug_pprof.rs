//! Go's `/debug/pprof/heap` and `/debug/pprof/allocs` on the real example service, read by `go tool pprof`
//! as Parca, Pyroscope and Grafana Alloy scrape them.

use std::io::Read;

use memprof_tests::acceptance::wait_for_sampled;
use memprof_tests::process::Program;
use memprof_tests::tools;

#[test]
fn debug_pprof_heap_serves_the_live_heap_to_pprof_scrapers() {
    // On demand, switched on by hand and off again: what a scraper reads with sampling off is said
    // (continuously, sampling is never off: tests/continuous.rs).
    let service =
        Program::service().env("MALLOC_CONF", "lg_prof_sample:14").env("MEMPROF_SAMPLING", "on-demand").spawn();
    service.get_json("/memory-profiler/heap_profile?active=true");
    wait_for_sampled(&service, &["service::open_session"]);
    let response = service.get("/debug/pprof/heap?gc=1");
    assert_eq!(response.status, 200, "{}", response.text());
    let mut protobuf = Vec::new();
    flate2::read::GzDecoder::new(&response.body[..]).read_to_end(&mut protobuf).expect("gzip");
    assert!(String::from_utf8_lossy(&protobuf).contains("service::open_session"));
    let delta = service.get("/debug/pprof/heap?seconds=1");
    assert_eq!(delta.status, 200, "{}", delta.text());
    let bad = service.get("/debug/pprof/heap?seconds=0");
    assert_eq!(
        (bad.status, bad.text()),
        (400, "Invalid parameter 'seconds': '0'; expected a whole number from 1 to 60.\n".to_owned())
    );
    let Some(report) = tools::pprof_top(&response.body, "inuse_space") else { return };
    assert!(report.contains("service::open_session"), "{report}");
    // Sampling on, on demand (jemalloc's dump, one interval): the total's error, from its samples.
    let comments = tools::pprof(&response.body, &["-comments"]).unwrap();
    assert!(
        comments.trim().starts_with("memprof: sampled: the total is within +- ")
            && comments.contains(" MB of the truth about 95 times in 100 (two standard errors, from the samples at a mean interval of 16 KiB"),
        "{comments}"
    );
    // With sampling off, a scraper is told why the profile is empty.
    service.get_json("/memory-profiler/heap_profile?active=false");
    let off = service.get("/debug/pprof/heap");
    let comments = tools::pprof(&off.body, &["-comments"]).unwrap();
    assert!(
        comments.trim().starts_with("memprof: sampling is off (prof.active false), so this profile holds no samples"),
        "{comments}"
    );
}

#[test]
fn debug_pprof_allocs_shows_what_was_allocated_and_freed_when_jemalloc_keeps_totals() {
    // Sampling on demand, switched on without totals (Parca's and Alloy's default scrape path): the in-use
    // profile, and a comment saying why (continuous sampling keeps totals: tests/continuous.rs).
    let without = Program::service()
        .env("MALLOC_CONF", "prof_active:true,lg_prof_sample:14")
        .env("MEMPROF_SAMPLING", "on-demand")
        .spawn();
    wait_for_sampled(&without, &["service::open_session"]);
    let in_use = without.get("/debug/pprof/allocs");
    assert_eq!(in_use.status, 200, "{}", in_use.text());
    if let Some(comments) = tools::pprof(&in_use.body, &["-comments"]) {
        let lines: Vec<&str> = comments.trim().lines().collect();
        assert_eq!(
            lines[0],
            "This is the in-use heap (inuse_objects, inuse_space): allocation totals (alloc_objects, alloc_space) are kept with continuous sampling (MEMPROF_SAMPLING=continuous), or by jemalloc when the program starts with MALLOC_CONF=prof_accum:true"
        );
        assert!(
            lines[1..].iter().any(|line| line.starts_with("memprof: sampled: the total is within +- ")),
            "{comments}"
        );
        let top = tools::pprof_top(&in_use.body, "inuse_space").unwrap();
        assert!(top.lines().any(|line| line.ends_with("service::open_session")), "{top}");
    }

    let service = Program::service()
        .env("MALLOC_CONF", "prof_accum:true,prof_active:true,lg_prof_sample:14")
        .env("MEMPROF_SAMPLING", "on-demand")
        .spawn();
    // 50,000 responses (400 MB through `render_response`) are sampled at 1 in 16 KiB for certain; the first
    // few are not (a run of CI once scraped after 20 and found none).
    service.wait_for_line(|line| line == "service: 50000 requests handled");
    let response = service.get("/debug/pprof/allocs");
    assert_eq!(response.status, 200, "{}", response.text());
    // `render_response` frees its buffers at once: it is in what was allocated, not in what is live.
    let Some(allocated) = tools::pprof_top(&response.body, "alloc_space") else { return };
    assert!(allocated.lines().any(|line| line.ends_with("service::render_response")), "{allocated}");
    let live = tools::pprof_top(&response.body, "inuse_space").unwrap();
    assert!(
        live.contains("service::open_session") && !live.lines().any(|line| line.ends_with("service::render_response")),
        "{live}"
    );
}
