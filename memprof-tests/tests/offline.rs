//! `memprof analyze`: the offline analysis of a raw dump, for stripped production binaries, and its errors.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use memprof_tests::process::{Program, built_binary};
use memprof_tests::tools::{self, Scratch};

/// `memprof analyze <arguments>`: exit status, stdout, stderr.
fn analyze(arguments: &[&str]) -> (bool, String, String) {
    let output = Command::new(built_binary("memprof-tool")).arg("analyze").args(arguments).output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

/// A raw dump of a finished 2-second run of the example service holding `open_session` (a first run on a
/// saturated machine may hold nothing: see `finished_run_holding`), written to `path`.
fn dump_of_the_service(path: &Path) {
    let service = Program::service().env("MALLOC_CONF", "lg_prof_sample:14").spawn();
    let id = memprof_tests::acceptance::finished_run_holding(&service, "2secs", "service::open_session");
    let raw = service.get(&format!("/memory-profiler/download/raw?id={id}"));
    assert_eq!(raw.status, 200, "{}", raw.text());
    std::fs::write(path, raw.body).unwrap();
}

/// The file the record keeps beside a profile (`<profile>.variance`: the variance of its total, each sample
/// weighed by the interval it was drawn at, and what a calibration by size class left out), as it lies in
/// the profile directory after an OOM kill, is read with the dump: the text says that error and those bytes,
/// not an error estimated from the file's one interval; a file that does not read as one says nothing.
#[test]
fn the_variance_kept_beside_a_dump_is_said_with_what_its_calibration_left_out() {
    let scratch = Scratch::new("variance");
    let dump = scratch.join("memprof.3.heap");
    dump_of_the_service(&dump);
    let variance = memprof_analysis::variance_path(&dump);
    std::fs::write(&variance, "1e12\ncalibrated 4194304 1048576\n").unwrap();
    let (succeeded, text, stderr) = analyze(&[dump.to_str().unwrap()]);
    assert!(succeeded, "{stderr}");
    assert!(text.contains("within +- 1.9 MB of the truth") && text.contains("drawn at"), "{text}");
    assert!(text.contains("up to 4.0 MiB more in classes no live sample reached, in no stack; 1.0 MiB"), "{text}");
    std::fs::write(&variance, "a lot\ncalibrated 4194304 1048576\n").unwrap();
    let (_, text, _) = analyze(&[dump.to_str().unwrap()]);
    assert!(!text.contains("drawn at") && !text.contains("no live sample reached"), "{text}");
}

#[test]
fn malformed_dumps_get_line_numbered_errors() {
    let scratch = Scratch::new("malformed");
    let counts = "heap_v2/524288\n  t*: 1: 2 [0: 0]\n";
    let cases = [
        ("", "line 1: the profile is empty"),
        ("heap_v1/524288\n", "line 1: expected a `heap_v2/<sample period>` header, found \"heap_v1/524288\""),
        ("heap_v2/0x10\n", "line 1: invalid sample period \"0x10\""),
        (&format!("{counts}@ 0x1 0x2\n") as &str, "line 3: this stack has no `t*:` line of counts"),
        (&format!("{counts}@ 0x1 zz\n  t*: 1: 2 [0: 0]\n"), "line 3: expected a 0x-prefixed address, found \"zz\""),
        (&format!("{counts}@ 0x1\n  t*: one: 2 [0: 0]\n"), "line 4: invalid object count \" one\""),
        (
            &format!("{counts}@ 0x1\n  t*: 1: 2 [0: 0]\n"),
            "line 4: the profile ends before `MAPPED_LIBRARIES:`; it is truncated",
        ),
        (
            &format!("{counts}@ 0x1\n  t*: 1: 2 [0: 0]\n\nMAPPED_LIBRARIES:\nnot a map line\n"),
            "line 7: expected `start-end perms offset dev inode [path]`, found \"not a map line\"",
        ),
    ];
    for (index, (dump, message)) in cases.iter().enumerate() {
        let path = scratch.join(&format!("{index}.heap"));
        std::fs::write(&path, dump).unwrap();
        let (succeeded, stdout, stderr) = analyze(&[path.to_str().unwrap()]);
        assert!(!succeeded && stdout.is_empty(), "{dump:?}");
        assert_eq!(stderr, format!("memprof: {}: {message}\n", path.display()), "{dump:?}");
    }
    let (succeeded, _, stderr) = analyze(&["/nonexistent.heap"]);
    assert!(!succeeded);
    assert_eq!(stderr, "memprof: /nonexistent.heap: No such file or directory (os error 2)\n");
}

#[test]
fn stripped_binaries_are_symbolized_with_their_unstripped_build_or_split_debug_info() {
    let scratch = Scratch::new("offline");
    let dump = scratch.join("service.heap");
    dump_of_the_service(&dump);
    let dump = dump.to_str().unwrap();
    let original = built_binary("service");

    // The unstripped build, copied elsewhere (as on a developer's machine): full names and lines.
    std::fs::create_dir_all(scratch.join("build")).unwrap();
    let unstripped = scratch.join("build/service");
    std::fs::copy(&original, &unstripped).unwrap();
    let (succeeded, text, stderr) = analyze(&[dump, "--binary", unstripped.to_str().unwrap(), "--lines"]);
    assert!(succeeded, "{stderr}");
    assert!(text.lines().any(|line| line.contains("service::open_session ") && line.contains("service.rs:")), "{text}");
    assert!(noted(&text).is_empty(), "nothing to note: {text}");

    let output = scratch.join("service.pb.gz");
    let (succeeded, _, stderr) =
        analyze(&[dump, "--binary", unstripped.to_str().unwrap(), "--format", "pprof", "-o", output.to_str().unwrap()]);
    assert!(succeeded, "{stderr}");
    assert_eq!(&std::fs::read(&output).unwrap()[..2], [0x1f, 0x8b]);

    let Some(objcopy) = tools::find("objcopy", "binutils") else { return };
    // Stripped of everything: module+offset, never a wrong name.
    std::fs::create_dir_all(scratch.join("stripped")).unwrap();
    let stripped = scratch.join("stripped/service");
    tools::run(&objcopy, &["--strip-all", original.to_str().unwrap(), stripped.to_str().unwrap()], &[]);
    let (succeeded, text, stderr) = analyze(&[dump, "--binary", stripped.to_str().unwrap()]);
    assert!(succeeded, "{stderr}");
    assert!(!text.contains("open_session"), "{text}");
    assert!(text.lines().nth(1).is_some_and(|row| row.contains("% service+0x")), "{text}");
    // The note names the file given, which is the one to replace, and the binary it stood for.
    let note = format!("# no symbols in {} (read for {}) for ", stripped.display(), original.display());
    assert!(text.contains(&note) && text.contains("es: it is stripped; symbolize the raw dump"), "{text}");
    // Folded stacks have no place for it: the command says it.
    let (succeeded, _, stderr) = analyze(&[dump, "--binary", stripped.to_str().unwrap(), "--format", "collapsed"]);
    assert!(succeeded, "{stderr}");
    assert!(stderr.starts_with(&format!("memprof: note: {}", &note[2..])), "{stderr}");

    // Symbols without debug info (`strip = "debuginfo"`, a release build's default): names without inlined
    // frames or lines, and the build setting that brings them.
    let symbols_only = scratch.join("stripped/service-symbols");
    tools::run(&objcopy, &["--strip-debug", original.to_str().unwrap(), symbols_only.to_str().unwrap()], &[]);
    let (succeeded, text, stderr) = analyze(&[dump, "--binary", symbols_only.to_str().unwrap()]);
    assert!(succeeded, "{stderr}");
    assert!(text.lines().any(|line| line.ends_with("% service::open_session")), "{text}");
    let note = format!(
        "# no debug info in {} (read for {}): functions inlined into others show as their callers",
        symbols_only.display(),
        original.display()
    );
    assert!(text.contains(&note), "{text}");

    // Stripped, with its debug info split off beside it and named by `.gnu_debuglink` (checked by CRC), its
    // sections zlib-compressed as distributions ship them (inflated within a bound).
    std::fs::create_dir_all(scratch.join("split")).unwrap();
    let debug = scratch.join("split/service.debug");
    let split = scratch.join("split/service");
    let keep =
        ["--only-keep-debug", "--compress-debug-sections=zlib", original.to_str().unwrap(), debug.to_str().unwrap()];
    tools::run(&objcopy, &keep, &[]);
    let link = format!("--add-gnu-debuglink={}", debug.display());
    tools::run(&objcopy, &["--strip-all", &link, original.to_str().unwrap(), split.to_str().unwrap()], &[]);
    let (succeeded, text, stderr) = analyze(&[dump, "--binary", split.to_str().unwrap(), "--lines"]);
    assert!(succeeded, "{stderr}");
    assert!(text.lines().any(|line| line.contains("service::open_session ") && line.contains("service.rs:")), "{text}");
    assert!(noted(&text).is_empty(), "nothing to note: {text}");
}

/// A stripped binary whose debug info a debuginfod server has (elfutils' own, `debuginfod -F`): found by
/// its build id through `DEBUGINFOD_URLS`, kept in the client cache, names and lines as unstripped; what
/// the server does not have leaves the binary's offsets, with the note.
#[test]
fn stripped_binaries_are_symbolized_from_a_debuginfod_server() {
    let (Some(objcopy), Some(debuginfod)) =
        (tools::find("objcopy", "binutils"), tools::find("debuginfod", "debuginfod"))
    else {
        return;
    };
    let scratch = Scratch::new("debuginfod");
    let dump = scratch.join("service.heap");
    dump_of_the_service(&dump);
    let dump = dump.to_str().unwrap();
    let original = built_binary("service");
    let served = scratch.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let debug = served.join("service.debug");
    tools::run(&objcopy, &["--only-keep-debug", original.to_str().unwrap(), debug.to_str().unwrap()], &[]);
    std::fs::create_dir_all(scratch.join("stripped")).unwrap();
    let stripped = scratch.join("stripped/service");
    tools::run(&objcopy, &["--strip-all", original.to_str().unwrap(), stripped.to_str().unwrap()], &[]);

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let database = scratch.join("debuginfod.sqlite");
    let mut server = Command::new(&debuginfod)
        .args(["-F", "-p", &port.to_string(), "-d", database.to_str().unwrap(), "-t", "1"])
        .arg(&served)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("debuginfod starts");
    let base = format!("http://127.0.0.1:{port}");
    let id = build_id_of(&original);
    memprof_tests::waiting::wait_until("debuginfod to serve the debug file", Duration::from_secs(60), || {
        let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        match memprof_tests::http::try_get(address, &format!("/buildid/{id}/debuginfo")) {
            Some(answer) if answer.status == 200 => Ok(()),
            Some(answer) => Err(format!("HTTP {}", answer.status)),
            None => Err("not listening".to_owned()),
        }
    });

    let symbolize = |urls: &str, cache: &Path, environment: &[(&str, &str)]| {
        let output = Command::new(built_binary("memprof-tool"))
            .args(["analyze", dump, "--binary", stripped.to_str().unwrap(), "--lines"])
            .env("DEBUGINFOD_URLS", urls)
            .env("DEBUGINFOD_CACHE_PATH", cache)
            .envs(environment.iter().copied())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let named =
        |text: &str| text.lines().any(|line| line.contains("service::open_session ") && line.contains("service.rs:"));
    let unnamed = |text: &str| !text.contains("open_session") && text.contains("it is stripped");

    // Too large for DEBUGINFOD_MAXSIZE: refused, nothing kept.
    let small = scratch.join("cache-small");
    let text = symbolize(&base, &small, &[("DEBUGINFOD_MAXSIZE", "4096")]);
    assert!(unnamed(&text), "{text}");
    assert!(!small.join(&id).join("debuginfo").exists());

    // A server that does not answer, tried first: given up after DEBUGINFOD_TIMEOUT, then the next server.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().take(4).collect();
        std::thread::sleep(Duration::from_secs(120));
        drop(held);
    });
    let cache = scratch.join("cache");
    let began = std::time::Instant::now();
    let text = symbolize(
        &format!("{silent_url} http://127.0.0.1:1/nothing-here {base}"),
        &cache,
        &[("DEBUGINFOD_TIMEOUT", "2")],
    );
    assert!(began.elapsed() < Duration::from_secs(60), "{:?}", began.elapsed());
    assert!(named(&text), "{text}");
    assert!(
        text.contains(&format!(
            "names in {} (read for {}) from the debug info of the debuginfod server {base}",
            stripped.display(),
            original.display()
        )),
        "{text}"
    );
    assert!(cache.join(&id).join("debuginfo").is_file(), "kept in elfutils' client cache");

    // In the process: the stripped service names its own functions with the server's debug info, and says
    // where they came from.
    let service = memprof_tests::process::Launch::new(&stripped)
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .env("MALLOC_CONF", "lg_prof_sample:14")
        .env("DEBUGINFOD_URLS", &base)
        .env("DEBUGINFOD_CACHE_PATH", scratch.join("cache-service").to_str().unwrap())
        .spawn();
    let run = memprof_tests::acceptance::finished_run_holding(&service, "2secs", "service::open_session");
    let text = service.get(&format!("/memory-profiler/download/text?id={run}")).text();
    assert!(text.contains(&format!("from the debug info of the debuginfod server {base}")), "{text}");
    drop(service);

    // From the cache, with the server gone.
    server.kill().unwrap();
    server.wait().unwrap();
    let text = symbolize(&base, &cache, &[]);
    assert!(named(&text) && text.contains("from the debug info of debuginfod's cache"), "{text}");

    // A server that sends another binary: refused by its build id.
    let impostor = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let impostor_url = format!("http://{}", impostor.local_addr().unwrap());
    std::thread::spawn(move || {
        let body = std::fs::read("/bin/true").unwrap();
        for stream in impostor.incoming().take(4) {
            use std::io::{Read, Write};
            let mut stream = stream.unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
        }
    });
    let fresh = scratch.join("cache-impostor");
    let text = symbolize(&impostor_url, &fresh, &[]);
    assert!(unnamed(&text), "{text}");
    assert!(!fresh.join(&id).join("debuginfo").exists());

    // A cached file that is not that binary's is not used (and no server has it): offsets, and the note.
    std::fs::write(cache.join(&id).join("debuginfo"), b"not the debug info").unwrap();
    let text = symbolize(&base, &cache, &[]);
    assert!(unnamed(&text), "{text}");
}

/// The GNU build id of the binary at `path`, in lowercase hexadecimal.
fn build_id_of(path: &Path) -> String {
    use object::Object;
    let bytes = std::fs::read(path).unwrap();
    let binary = object::File::parse(&*bytes).unwrap();
    binary.build_id().unwrap().expect("a build id").iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The notes a text download ends with, but the sampling error every sampled profile says.
fn noted(text: &str) -> Vec<&str> {
    text.lines().filter(|line| line.starts_with("# ") && !line.starts_with("# sampled: the total is within ")).collect()
}
