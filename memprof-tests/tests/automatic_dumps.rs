//! Automatic dumps (`MEMPROF_DUMP_*`) of the real example service: every N bytes, at a resident threshold,
//! at each new high-water mark, in a bounded ring; malformed settings reported.

use memprof_tests::process::{PATIENCE, Program};
use memprof_tests::waiting::wait_until;

/// The automatic dumps `state` lists, newest first, once at least `count` exist.
fn automatic_dumps(service: &Program, count: usize) -> Vec<memprof_wire::KeptProfile> {
    wait_until(&format!("{count} automatic dumps"), PATIENCE, || {
        let dumps = service.state().automatic_dumps.dumps;
        if dumps.len() >= count { Ok(dumps) } else { Err(format!("{dumps:?}")) }
    })
}

/// Every 16 MiB allocated a dump, two kept. Sampled every 64 KiB without the budget of sampling work: the
/// newest dump must name the sessions' function, and a debug build under load, thinned to one slot in 32
/// at 512 KiB (one sample per 16 MiB), held none of their 16 MiB a third of the time.
#[test]
fn automatic_dumps_every_n_bytes_stay_in_a_bounded_ring() {
    let service = Program::service()
        .env("MALLOC_CONF", "prof_active:true,lg_prof_sample:16")
        .env("MEMPROF_SAMPLING_BUDGET", "off")
        .env("MEMPROF_DUMP_EVERY", "16MiB")
        .env("MEMPROF_DUMP_KEEP", "2")
        .spawn();
    let first = automatic_dumps(&service, 2);
    let oldest = first[1].id;
    // Wait for a third dump: the oldest leaves the ring, which still holds two.
    let later = wait_until("a third dump, the oldest gone", PATIENCE, || {
        let dumps = automatic_dumps(&service, 2);
        let gone = dumps.iter().all(|dump| dump.id != oldest);
        if gone { Ok(dumps) } else { Err(format!("{dumps:?}")) }
    });
    assert_eq!(later.len(), 2);
    let reason = later[0].started_by.as_str();
    assert!(
        reason.starts_with("automatic: ") && reason.ends_with(" MiB allocated since the last interval dump"),
        "{reason}"
    );
    let newest = later[0].id;
    assert!(service.get(&format!("/memory-profiler/download/raw?id={newest}")).text().starts_with("heap_v2/"));
    let text = service.get(&format!("/memory-profiler/download/text?id={newest}"));
    assert!(text.status == 200 && text.text().contains("% service::open_session\n"), "{}", text.text());
    assert_eq!(service.get(&format!("/memory-profiler/download/raw?id={oldest}")).status, 404);
    let settings = service.state().automatic_dumps.settings.expect("automatic dumps on");
    assert_eq!(settings.every_bytes, Some(16 << 20));
}

/// Sampled continuously from its start, the service's automatic dumps hold the whole heap calibrated by size
/// class: their readable downloads (text, flame graph, call graph) say so after the total's error, with
/// what the calibration left out (the file beside the dump keeps it), as `/debug/pprof/heap` does.
#[test]
fn an_automatic_dump_s_readable_downloads_say_how_it_was_calibrated() {
    // Checked once a second: three kept, a dump found stays some seconds.
    let service = Program::service().env("MEMPROF_DUMP_EVERY", "32MiB").env("MEMPROF_DUMP_KEEP", "3").spawn();
    // One holding the sessions (the first may come before any live sample did).
    let id = wait_until("an automatic dump holding the sessions", PATIENCE, || {
        let id = automatic_dumps(&service, 1)[0].id;
        let text = service.get(&format!("/memory-profiler/download/text?id={id}")).text();
        if text.contains("% service::open_session\n") { Ok(id) } else { Err(text) }
    });
    for format in ["text", "flamegraph", "graph"] {
        let download = service.get(&format!("/memory-profiler/download/{format}?id={id}"));
        let body = download.text();
        assert!(
            download.status == 200 && body.contains("each size class sampled counted whole by jemalloc"),
            "{format}: {body}"
        );
        assert!(body.contains(" more in classes no live sample reached"), "{format}: {body}");
    }
}

#[test]
fn a_resident_threshold_dumps_once_per_crossing() {
    let service = Program::service()
        .env("MALLOC_CONF", "prof_active:true")
        .env("MEMPROF_DUMP_AT_RESIDENT", "0.1%")
        .env("MEMPROF_DUMP_MAX_BYTES", "1")
        .spawn();
    let dumps = automatic_dumps(&service, 1);
    let reason = dumps[0].started_by.as_str();
    assert!(reason.starts_with("automatic: resident ") && reason.contains(" MiB crossed 0.1% of the "), "{reason}");
    // The resident set stays above the threshold: no second dump, however long it stays there.
    service.wait_for_line(|line| line.starts_with("service: 50000 requests handled"));
    assert_eq!(automatic_dumps(&service, 1).len(), 1);
}

/// A malformed value is said as every setting's is, and ignored: the service, sampled continuously, keeps
/// the automatic dumps continuous sampling has by default (none by bytes allocated).
#[test]
fn a_malformed_automatic_dump_setting_is_reported_and_ignored() {
    let service = Program::service().env("MEMPROF_DUMP_EVERY", "lots").spawn();
    service.wait_for_line(|line| {
        line == "[memprof] ERROR MEMPROF_DUMP_EVERY=\"lots\" is not a size such as 1GiB; it is ignored"
    });
    let settings = service.state().automatic_dumps.settings.expect("continuous sampling's automatic dumps");
    assert_eq!((settings.every_bytes, settings.high_water_step), (None, Some(0.5)));
}

#[test]
fn a_new_high_water_mark_of_allocated_bytes_makes_a_dump() {
    let service =
        Program::service().env("MALLOC_CONF", "prof_active:true").env("MEMPROF_DUMP_HIGH_WATER", "10%").spawn();
    let dumps = automatic_dumps(&service, 1);
    let reason = dumps.last().unwrap().started_by.as_str();
    assert!(reason.starts_with("automatic: new high-water mark, ") && reason.ends_with(" MiB allocated"), "{reason}");
    let settings = service.state().automatic_dumps.settings.expect("automatic dumps on");
    assert_eq!((settings.high_water_step, settings.keep), (Some(0.1), 8));
}
