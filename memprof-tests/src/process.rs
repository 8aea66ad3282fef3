//! A real program under test: spawned with a chosen environment, its output collected line by line,
//! killed when the test ends.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub use crate::http::PATIENCE;

/// The line memprof logs once the endpoints are served.
const SERVING: &str = "Serving heap profiling endpoints on http://";

/// A binary of this package (the examples), beside the test executable's `deps/` directory, where cargo
/// builds them before running integration tests.
pub fn built_binary(name: &str) -> PathBuf {
    let test_executable = std::env::current_exe().unwrap();
    let directory = test_executable.parent().and_then(Path::parent).unwrap();
    directory.join(name)
}

/// Runs the `memprof` tool against `service` with `arguments`: its exit code, standard output and error.
///
/// ```no_run
/// let service = memprof_tests::process::Program::service().spawn();
/// let (code, state, _) = memprof_tests::process::memprof_tool(&service, &["state"]);
/// assert_eq!(code, 0, "{state}");
/// ```
pub fn memprof_tool(service: &Program, arguments: &[&str]) -> (i32, String, String) {
    let output = Command::new(built_binary("memprof-tool"))
        .arg("--url")
        .arg(format!("http://{}", service.address()))
        .args(arguments)
        .env_remove("MEMPROF_URL")
        .output()
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// A running program.
///
/// ```no_run
/// let service = memprof_tests::process::Program::service().spawn();
/// let state = service.get("/memory-profiler/state");
/// assert_eq!(state.status, 200);
/// ```
pub struct Program {
    child: Child,
    /// The threads reading its standard output and error, joined once it has exited.
    readers: Vec<thread::JoinHandle<()>>,
    /// The program's `TMPDIR`, removed once it has ended.
    _temporary: crate::tools::Scratch,
    output: Arc<(Mutex<Vec<String>>, Condvar)>,
    /// Where the endpoints are served, when they are.
    pub address: Option<SocketAddr>,
    /// Its standard input, when it was started [`Launch::with_stdin`].
    stdin: Mutex<Option<std::process::ChildStdin>>,
}

/// How to start a [`Program`].
pub struct Launch {
    command: Command,
    /// A `TMPDIR` of the program's own: what one killed test program leaves (profiles of an ended process)
    /// is never another's, and nothing stays in the machine's `/tmp`.
    temporary: crate::tools::Scratch,
    wait_for_endpoints: bool,
    /// The line, other than memprof's, that says where the endpoints are: `marker` then `http://address/`;
    /// `None` for a program that says nothing: its listening socket is looked up.
    serving_marker: Option<&'static str>,
}

impl Program {
    /// The example service, with the endpoints switched on at any free loopback port.
    pub fn service() -> Launch {
        Launch::new(built_binary("service"))
            .env("LIBPROCESS_MEMORY_PROFILING", "true")
            .env("MEMPROF_HTTP", "127.0.0.1:0")
    }

    /// The `explained` test program (src/bin/explained.rs) with `arguments` (its state), serving the
    /// endpoints at any free loopback port; it prints `explained: ready` once in its state.
    pub fn explained(arguments: &[&str]) -> Launch {
        Launch::new(built_binary("explained"))
            .env("LIBPROCESS_MEMORY_PROFILING", "true")
            .env("MEMPROF_HTTP", "127.0.0.1:0")
            .args(arguments)
    }

    /// The `windows` test program (src/bin/windows.rs, sampled continuously) serving the endpoints at any
    /// free loopback port, its standard input the test's; it prints `windows: ready` once started.
    pub fn windows() -> Launch {
        Launch::new(built_binary("windows"))
            .env("LIBPROCESS_MEMORY_PROFILING", "true")
            .env("MEMPROF_HTTP", "127.0.0.1:0")
            .with_stdin()
    }

    /// The `scope!` example.
    pub fn scope_example() -> Launch {
        Launch::new(built_binary("scope"))
    }

    /// Writes `line` to the program's standard input (started [`Launch::with_stdin`]), then waits until it
    /// prints `done` (a line of stdout or stderr equal to it) after that: the same command told twice
    /// waits for its second `done`, not the first's.
    ///
    /// # Panics
    /// When the program has no standard input of the test's, or never prints `done`.
    pub fn tell(&self, line: &str, done: &str) {
        use std::io::Write;
        let mut stdin = self.stdin.lock().unwrap();
        let stdin = stdin.as_mut().expect("the program was started with_stdin");
        let printed_before = self.output.0.lock().unwrap().len();
        writeln!(stdin, "{line}").and_then(|()| stdin.flush()).expect("the program reads its input");
        self.wait_for_line_from(printed_before, |printed| printed == done);
    }

    /// Waits until a line of stdout or stderr satisfies `wanted`, and returns it.
    ///
    /// # Panics
    /// When no such line comes within [`PATIENCE`]; the message holds everything printed so far.
    pub fn wait_for_line(&self, wanted: impl Fn(&str) -> bool) -> String {
        self.wait_for_line_from(0, wanted)
    }

    /// [`Program::wait_for_line`], among the lines printed from the `first`th (counted from 0) on.
    fn wait_for_line_from(&self, first: usize, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        let (lines, printed) = &*self.output;
        let mut lines = lines.lock().unwrap();
        loop {
            if let Some(line) = lines.iter().skip(first).find(|line| wanted(line)) {
                return line.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the expected line never came; the program printed:\n{}", lines.join("\n"));
            lines = printed.wait_timeout(lines, left).unwrap().0;
        }
    }

    /// The address the program listens on, once it does.
    fn wait_until_listening(&mut self) -> SocketAddr {
        crate::waiting::wait_every("the program to listen", PATIENCE, Duration::from_millis(20), || {
            let address = crate::sockets::listening_address(self.pid());
            assert!(self.is_running(), "the program ended without listening:\n{}", self.output().join("\n"));
            address.ok_or_else(|| format!("it printed:\n{}", self.output().join("\n")))
        })
    }

    /// Everything printed so far, stdout and stderr interleaved as read.
    pub fn output(&self) -> Vec<String> {
        self.output.0.lock().unwrap().clone()
    }

    /// Whether the program is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the program to exit on its own and returns whether it succeeded.
    pub fn wait(&mut self) -> bool {
        self.wait_for_exit().success()
    }

    /// Waits for the program to exit on its own and returns how it ended.
    ///
    /// # Panics
    /// When it does not end within [`PATIENCE`].
    pub fn wait_for_exit(&mut self) -> std::process::ExitStatus {
        let exited = crate::waiting::wait_every("the program to exit", PATIENCE, Duration::from_millis(50), || {
            self.child.try_wait().unwrap().ok_or_else(|| format!("it printed:\n{}", self.output().join("\n")))
        });
        // Its pipes are closed (unless a child of its own holds them): the readers have the last lines once
        // they end.
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        exited
    }

    /// Sends the program a signal by name (`TERM`, `KILL`), as `kill -TERM <pid>` does.
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill").arg(format!("-{name}")).arg(self.pid().to_string()).status().unwrap();
        assert!(sent.success(), "kill -{name} {}", self.pid());
    }

    /// The endpoints' address.
    ///
    /// # Panics
    /// When the program does not serve them.
    pub fn address(&self) -> SocketAddr {
        self.address.expect("the program serves no endpoints")
    }

    /// `GET path` against the program's endpoints.
    pub fn get(&self, path: &str) -> crate::http::Response {
        crate::http::request(self.address(), "GET", path)
    }

    /// `GET path`, expecting 200 and a JSON body.
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let response = self.get(path);
        assert_eq!(response.status, 200, "GET {path}: {}", response.text());
        response.json()
    }

    /// `GET path`, expecting 200 and an answer of memprof-wire's type `T`.
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        self.get(path).parsed(path)
    }

    /// `GET /memory-profiler/start<query>` (`?duration=1mins`, or `""`), expecting a run started (or the one
    /// already active).
    pub fn start(&self, query: &str) -> memprof_wire::Started {
        self.get_as(&format!("/memory-profiler/start{query}"))
    }

    /// `GET /memory-profiler/stop`, expecting 200.
    pub fn stop(&self) -> memprof_wire::RunAnswer {
        self.get_as("/memory-profiler/stop")
    }

    /// `GET /memory-profiler/state`'s profiler, read through memprof-wire's types.
    pub fn state(&self) -> memprof_wire::ProfilerState {
        self.whole_state().memory_profiler
    }

    /// `GET /memory-profiler/state`, the profiler's and jemalloc's, read through memprof-wire's types.
    pub fn whole_state(&self) -> memprof_wire::State {
        let state = self.get_json("/memory-profiler/state");
        let parsed: Result<memprof_wire::State, _> = serde_json::from_value(state.clone());
        parsed.unwrap_or_else(|error| panic!("state is not memprof-wire's State ({error}): {state:#}"))
    }

    /// The names of the threads of the program (from `/proc`).
    pub fn thread_names(&self) -> Vec<String> {
        let tasks = PathBuf::from(format!("/proc/{}/task", self.pid()));
        let mut names: Vec<String> = std::fs::read_dir(tasks)
            .map(|entries| {
                entries
                    .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path().join("comm")).ok())
                    .map(|name| name.trim().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Launch {
    /// A program at `path`, with a clean memprof environment.
    pub fn new(path: impl AsRef<Path>) -> Self {
        let mut command = Command::new(path.as_ref());
        let memprof_variables = std::env::vars_os()
            .filter_map(|(name, _)| name.into_string().ok())
            .filter(|name| name.starts_with("MEMPROF_"));
        let others = ["LIBPROCESS_MEMORY_PROFILING", "MALLOC_CONF", "_RJEM_MALLOC_CONF", "RUST_LOG"].map(str::to_owned);
        for variable in memprof_variables.chain(others) {
            command.env_remove(variable);
        }
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let temporary = crate::tools::Scratch::new("program");
        command.env("TMPDIR", temporary.join(""));
        Self { command, temporary, wait_for_endpoints: false, serving_marker: Some(SERVING) }
    }

    /// Waits, at start, for a line with `marker` followed by the address (`marker127.0.0.1:3000/`): for a
    /// program that serves the endpoints from its own server.
    pub fn serving_at(mut self, marker: &'static str) -> Self {
        self.wait_for_endpoints = true;
        self.serving_marker = Some(marker);
        self
    }

    /// Waits, at start, until the program listens on a TCP socket, and serves the endpoints there: for a
    /// program that prints no address (it binds port 0, so tests never race for a port).
    pub fn serving_where_it_listens(mut self) -> Self {
        self.wait_for_endpoints = true;
        self.serving_marker = None;
        self
    }

    /// Adds arguments.
    pub fn args(mut self, arguments: impl IntoIterator<Item = impl AsRef<std::ffi::OsStr>>) -> Self {
        self.command.args(arguments);
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        if name == "LIBPROCESS_MEMORY_PROFILING" {
            self.wait_for_endpoints = value.as_ref() == "true";
        }
        self.command.env(name, value);
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(mut self, name: &str) -> Self {
        if name == "LIBPROCESS_MEMORY_PROFILING" {
            self.wait_for_endpoints = false;
        }
        self.command.env_remove(name);
        self
    }

    /// Gives the program a standard input the test writes to ([`Program::tell`]); else it has none.
    pub fn with_stdin(mut self) -> Self {
        self.command.stdin(Stdio::piped());
        self
    }

    /// Serves no endpoints, or does not wait for them (their start is expected to fail).
    pub fn without_waiting_for_endpoints(mut self) -> Self {
        self.wait_for_endpoints = false;
        self
    }

    /// Starts the program; when it serves endpoints, waits until they are up.
    pub fn spawn(mut self) -> Program {
        let mut child = self.command.spawn().expect("the program starts");
        let output = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let readers = vec![
            collect_lines(child.stdout.take().unwrap(), Arc::clone(&output)),
            collect_lines(child.stderr.take().unwrap(), Arc::clone(&output)),
        ];
        let stdin = Mutex::new(child.stdin.take());
        let mut program = Program { child, readers, _temporary: self.temporary, output, address: None, stdin };
        if self.wait_for_endpoints {
            program.address = Some(match self.serving_marker {
                Some(marker) => {
                    let line = program.wait_for_line(|line| line.contains(marker));
                    line.split(marker).nth(1).and_then(|rest| rest.split('/').next()).unwrap().parse().unwrap()
                }
                None => program.wait_until_listening(),
            });
        }
        program
    }
}

fn collect_lines(
    stream: impl Read + Send + 'static,
    output: Arc<(Mutex<Vec<String>>, Condvar)>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let (lines, printed) = &*output;
            lines.lock().unwrap().push(line);
            printed.notify_all();
        }
    })
}
