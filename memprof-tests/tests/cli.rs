//! The `memprof` command-line tool driving the real example service.

use std::process::Command;

use memprof_tests::process::{Program, built_binary};
use memprof_tests::tools::Scratch;

/// `memprof --url <service> <arguments>`: exit code, stdout, stderr.
use memprof_tests::process::memprof_tool as memprof;

#[test]
fn the_cli_drives_a_service_from_start_to_download() {
    // On demand: the profiles kept are the runs alone (sampled continuously, the default, automatic dumps
    // are kept beside them), and sampling is off between runs.
    let service = Program::service().env("MEMPROF_SAMPLING", "on-demand").spawn();
    let (code, state, _) = memprof(&service, &["state"]);
    assert_eq!(code, 0);
    assert!(state.starts_with("profiling: enabled, sampling off (a sample every 512 KiB)\nrun: none\n"), "{state}");

    let (code, text, stderr) = memprof(&service, &["start", "--duration", "1s", "--wait", "--format", "text"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(text.starts_with("Total: ") && text.contains("% service::open_session\n"), "{text}");

    let (code, started, _) = memprof(&service, &["start", "--duration", "1m"]);
    assert!(code == 0 && started.starts_with("Successfully started new heap profiling run."), "{started}");
    let (code, stopped, _) = memprof(&service, &["stop"]);
    assert!(code == 0 && stopped.starts_with("Successfully stopped heap profiling run "), "{stopped}");

    let (code, json, _) = memprof(&service, &["--json", "state"]);
    assert_eq!(code, 0);
    let state: memprof_wire::State = serde_json::from_str(&json).unwrap();
    let first = state.memory_profiler.latest_run.expect("the run kept").id;

    let (code, on, _) = memprof(&service, &["activate"]);
    assert!(code == 0 && on.starts_with("Heap profiling switched on as run "), "{on}");
    let (code, off, _) = memprof(&service, &["deactivate"]);
    assert!(code == 0 && off.starts_with("Heap profiling switched off; the profile of run "), "{off}");
    let second = service.state().latest_run.expect("a latest run").id;

    let (code, difference, stderr) = memprof(&service, &["diff", &first.to_string(), &second.to_string()]);
    assert!(code == 0 && difference.starts_with("Total: "), "{difference}{stderr}");
    let scratch = Scratch::new("cli");
    let pprof = scratch.join("second.pb.gz");
    let (code, _, stderr) = memprof(
        &service,
        &["download", "--id", &second.to_string(), "--format", "pprof", "-o", pprof.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(&std::fs::read(&pprof).unwrap()[..2], [0x1f, 0x8b]);
    let dump = scratch.join("now.heap");
    let (code, _, _) = memprof(&service, &["dump", "-o", dump.to_str().unwrap()]);
    assert!(code == 0 && std::fs::read_to_string(&dump).unwrap().starts_with("heap_v2/"));
    let (code, stats, _) = memprof(&service, &["stats", "--text"]);
    assert!(code == 0 && stats.starts_with("___ Begin jemalloc statistics ___"));

    let mut kept: Vec<String> = service.state().runs.iter().map(|run| run.id.to_string()).collect();
    kept.reverse();
    let missing = scratch.join("missing.txt");
    let (code, _, stderr) = memprof(&service, &["download", "--id", "7", "-o", missing.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    let left: Vec<_> = std::fs::read_dir(scratch.join("")).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert!(!missing.exists() && left.len() == 2, "a failed download leaves no file: {left:?}");
    let (code, _, stderr) = memprof(&service, &["download", "--id", "7"]);
    assert_eq!(code, 1);
    let expected =
        format!("memprof: No heap profile with id 7; the profiles kept are {} (HTTP 404 from http://", kept.join(", "));
    assert!(stderr.starts_with(&expected), "{stderr}");
    let (code, _, stderr) = memprof(&service, &["start", "--duration", "2x"]);
    assert_eq!(code, 2, "bad usage: {stderr}");
    assert!(stderr.contains("unknown duration unit 'x' in '2x'"), "{stderr}");
}

#[test]
fn the_cli_says_when_the_service_cannot_be_reached() {
    let output =
        Command::new(built_binary("memprof-tool")).args(["--url", "http://127.0.0.1:9", "state"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("memprof: cannot reach http://127.0.0.1:9/memory-profiler/state: "), "{stderr}");
    assert!(
        stderr.ends_with(
            "is the service running, with its profiling endpoints switched on (LIBPROCESS_MEMORY_PROFILING=true)?\n"
        ),
        "{stderr}"
    );
}
