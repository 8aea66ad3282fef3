//! The dashboard in a real browser: headless Chromium driven through ChromeDriver (WebDriver) against the
//! example service. Skipped, with the reason printed, where Chromium or ChromeDriver is not installed
//! (Debian packages chromium and chromium-driver; `.ci/run` installs them).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use memprof_tests::process::{PATIENCE, Program};
use memprof_tests::tools::find;

/// ChromeDriver on a free loopback port, stopped when dropped, with a `TMPDIR` of its own (removed then):
/// Chromium makes its profile there, and a browser stopped with its driver cannot remove it itself.
struct Driver {
    process: Child,
    url: String,
    _temporary: memprof_tests::tools::Scratch,
}

impl Driver {
    fn start(chromedriver: &Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let temporary = memprof_tests::tools::Scratch::new("chromium");
        let process = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .env("TMPDIR", temporary.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        memprof_tests::waiting::wait_until(&format!("chromedriver to listen on {port}"), PATIENCE, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|error| error.to_string())
        });
        Self { process, url: format!("http://127.0.0.1:{port}"), _temporary: temporary }
    }

    /// A headless Chromium session (no sandbox: CI runs as root).
    async fn session(&self, chromium: &Path) -> Client {
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1500"],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector).capabilities(capabilities).connect(&self.url).await.expect("a WebDriver session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A browser showing `service`'s dashboard, or `None` (with the reason printed) where none is installed.
async fn open_dashboard(service: &Program) -> Option<(Driver, Client)> {
    open_dashboard_at(service, "/memory-profiler/").await
}

/// A browser showing the dashboard `service` serves at `path`.
async fn open_dashboard_at(service: &Program, path: &str) -> Option<(Driver, Client)> {
    let (chromium, chromedriver) = (find("chromium", "chromium")?, find("chromedriver", "chromium-driver")?);
    let driver = Driver::start(&chromedriver);
    let client = driver.session(&chromium).await;
    client.goto(&format!("http://{}{path}", service.address())).await.unwrap();
    Some((driver, client))
}

/// The status with no run: "Idle" on demand; sampling continuously (the default with the switch on), it
/// says so.
const NO_RUN: &str = "const status = document.getElementById('status').textContent; \
                      return status === 'Idle' || status === 'Sampling continuously (runs are windows over it)';";

/// Waits until `script` (a function body returning a value) returns something other than null or false.
async fn wait_for(client: &Client, what: &str, script: &str) -> serde_json::Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let value = client.execute(script, vec![]).await.expect("the script runs");
        if !(value.is_null() || value == false) {
            return value;
        }
        assert!(Instant::now() < deadline, "waited in vain for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Saves a screenshot under the test's target directory and prints where it is.
async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.png"));
    std::fs::write(&path, &png).unwrap();
    println!("screenshot: {} ({} bytes)", path.display(), png.len());
}

/// Starts a run of `duration` from the dashboard's form; the run's id, once the dashboard shows it.
async fn start_run(client: &Client, duration: &str) -> String {
    let field = client.find(Locator::Id("duration")).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(duration).await.unwrap();
    client.find(Locator::Id("start")).await.unwrap().click().await.unwrap();
    let run = wait_for(client, "the run", "return document.getElementById('status').dataset.run || null;").await;
    run.as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_started_from_the_dashboard_shows_the_services_allocations_in_its_flame_graph() {
    // On demand: the switches by hand are offered (sampled continuously they are not, as a test below checks).
    let service = Program::service().env("MEMPROF_SAMPLING", "on-demand").spawn();
    let Some((_driver, client)) = open_dashboard(&service).await else { return };

    // The state arrives, and the chart draws jemalloc's counters.
    wait_for(&client, "the state, no run", NO_RUN).await;
    wait_for(&client, "the chart", "return document.querySelector('#chart polyline[data-series=allocated]');").await;

    // While the run goes: its id and a countdown.
    let run: u64 = start_run(&client, "3secs").await.parse().unwrap();
    let message = client.find(Locator::Id("message")).await.unwrap().text().await.unwrap();
    assert!(message.starts_with("Successfully started new heap profiling run."), "{message}");
    wait_for(&client, "the countdown", "return document.getElementById('status-detail').dataset.remaining || null;")
        .await;

    // When it ends: listed with its downloads, and its flame graph shown.
    wait_for(&client, "the finished run", &format!("return document.getElementById('run-{run}');")).await;
    // The message line no longer says the run was started: it says the run ended.
    let ended = format!("return document.getElementById('message').dataset.ended === '{run}';");
    wait_for(&client, "the message that the run ended", &ended).await;
    let message = client.find(Locator::Id("message")).await.unwrap().text().await.unwrap();
    assert_eq!(message, format!("Run {run} has ended; its profile is listed below."));
    let shown = format!("return document.getElementById('flamegraph').getAttribute('data-run') === '{run}';");
    wait_for(&client, "the flame graph", &shown).await;
    let downloads =
        client.find(Locator::Css(&format!("#run-{run} td:last-child"))).await.unwrap().text().await.unwrap();
    assert_eq!(downloads, "raw · text · graph · flamegraph · collapsed · pprof");
    screenshot(&client, "dashboard").await;

    client.enter_frame(0).await.unwrap();
    let flame_graph = client.source().await.unwrap();
    for function in ["open_session", "index_document"] {
        assert!(flame_graph.contains(function), "{function} is not in the flame graph:\n{flame_graph}");
    }
    client.enter_parent_frame().await.unwrap();

    // The run's live bytes by label (the example labels by tenant, 3:1), and its flame graph split by one.
    let rows =
        "return document.getElementById('label-tenant-acme') && document.getElementById('label-tenant-initech');";
    wait_for(&client, "the bytes by label", rows).await;
    let mut shares = Vec::new();
    for tenant in ["acme", "initech"] {
        let cell = format!("#label-tenant-{tenant} td:last-child");
        let share = client.find(Locator::Css(&cell)).await.unwrap().text().await.unwrap();
        shares.push(share.trim_end_matches('%').parse::<f64>().unwrap_or_else(|_| panic!("{tenant}: {share}")));
    }
    // Shares of the whole heap, which holds unlabelled memory too: acme's three to initech's one shows as
    // acme's share well above initech's (a few dozen samples in a 3-second run).
    assert!(shares[0] > shares[1] && shares[0] + shares[1] <= 100.5, "acme's and initech's shares: {shares:?}%");
    client.find(Locator::Id("split-by")).await.unwrap().select_by_value("tenant").await.unwrap();
    let split = format!(
        "const frame = document.getElementById('flamegraph'); \
         return frame.getAttribute('data-run') === '{run}' && frame.getAttribute('data-by') === 'tenant';"
    );
    wait_for(&client, "the flame graph by tenant", &split).await;
    client.enter_frame(0).await.unwrap();
    let by_tenant = client.source().await.unwrap();
    assert!(by_tenant.contains("tenant=acme") && by_tenant.contains("tenant=initech"), "{by_tenant}");
    client.enter_parent_frame().await.unwrap();

    // Sampling switched on and off by hand makes a second profile; then the difference of the two.
    client.find(Locator::Id("activate")).await.unwrap().click().await.unwrap();
    let manual = "return document.getElementById('status').textContent.endsWith('(switched on by hand)') \
                  && document.getElementById('status').dataset.run;";
    let second: u64 = wait_for(&client, "the manual run", manual).await.as_str().unwrap().parse().unwrap();
    client.find(Locator::Id("deactivate")).await.unwrap().click().await.unwrap();
    let shown = format!("return document.getElementById('flamegraph').getAttribute('data-run') === '{second}';");
    wait_for(&client, "the second flame graph", &shown).await;
    client.find(Locator::Id("diff-show")).await.unwrap().click().await.unwrap();
    let title = format!("Flame graph of run {second} minus run {run}");
    let diff = format!("return document.getElementById('viewer-title').textContent === '{title}';");
    wait_for(&client, "the difference", &diff).await;
    client.close().await.unwrap();
}

/// Nested where a service keeps its admin routes (`examples/axum-service`'s `nested`: at
/// `/admin/memory-profiler`), the dashboard asks for its data where it is served: a run started from it
/// ends with its flame graph.
#[tokio::test(flavor = "current_thread")]
async fn nested_at_another_path_the_dashboard_fetches_from_where_it_is_served() {
    let service = memprof_tests::process::Launch::new(memprof_tests::adopters::adopters().join("nested"))
        .env("ADDR", "127.0.0.1:0")
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .serving_at("nested: listening on http://")
        .spawn();
    assert_eq!(service.get("/memory-profiler/state").status, 404, "nothing at memprof's own paths");
    let Some((_driver, client)) = open_dashboard_at(&service, "/admin/memory-profiler").await else { return };
    wait_for(&client, "the state, no run", NO_RUN).await;
    let run = start_run(&client, "2secs").await;
    wait_for(&client, "the finished run", &format!("return document.getElementById('run-{run}');")).await;
    let shown = format!("return document.getElementById('flamegraph').getAttribute('data-run') === '{run}';");
    wait_for(&client, "the flame graph", &shown).await;
    assert_eq!(service.get(&format!("/admin/memory-profiler/download/raw?id={run}")).status, 200);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn with_a_token_the_dashboard_asks_for_it_and_then_works() {
    let service = Program::service().env("MEMPROF_TOKEN", "s3cret").spawn();
    let Some((_driver, client)) = open_dashboard(&service).await else { return };

    let prompt = "return !document.getElementById('token-panel').hidden;";
    wait_for(&client, "the token prompt", prompt).await;
    let hidden = client.execute("return document.getElementById('profiler-panel').hidden;", vec![]).await.unwrap();
    assert_eq!(hidden, true, "nothing but the prompt shows without the token");

    let input = client.find(Locator::Id("token-input")).await.unwrap();
    input.send_keys("wrong").await.unwrap();
    client.find(Locator::Id("token-submit")).await.unwrap().click().await.unwrap();
    let refused = "return document.getElementById('token-error').textContent === 'That token was refused.';";
    wait_for(&client, "the refusal", refused).await;

    input.clear().await.unwrap();
    input.send_keys("s3cret").await.unwrap();
    client.find(Locator::Id("token-submit")).await.unwrap().click().await.unwrap();
    wait_for(&client, "the state, no run", NO_RUN).await;
    wait_for(&client, "the prompt to go", "return document.getElementById('token-panel').hidden;").await;
    client.close().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn the_dashboard_explains_retention_stacks_the_classes_and_purges_on_request() {
    let program = Program::explained(&["retention"]).spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let Some((_driver, client)) = open_dashboard(&program).await else { return };

    let verdict = "return document.getElementById('verdict').dataset.kind === 'retention' \
                   && document.getElementById('verdict').textContent;";
    let verdict = wait_for(&client, "the retention verdict", verdict).await;
    assert!(verdict.as_str().unwrap().starts_with("retention: jemalloc keeps "), "{verdict}");
    let fix = client.find(Locator::Id("fix")).await.unwrap().text().await.unwrap();
    assert!(fix.contains("background_thread is off"), "{fix}");
    wait_for(
        &client,
        "the stacked classes",
        "return document.querySelector('#classes-chart polygon[data-series=free]');",
    )
    .await;
    let legend = client.find(Locator::Id("classes-legend")).await.unwrap().text().await.unwrap();
    assert!(legend.contains("free ") && legend.contains("objects ") && legend.contains("unattributed "), "{legend}");
    screenshot(&client, "dashboard-explained").await;

    client.find(Locator::Id("purge")).await.unwrap().click().await.unwrap();
    let purged = "return document.getElementById('message').textContent.startsWith('Returned ') \
                  && document.getElementById('message').textContent;";
    wait_for(&client, "the purge's answer", purged).await;
    wait_for(&client, "the healthy verdict", "return document.getElementById('verdict').dataset.kind === 'healthy';")
        .await;
    client.close().await.unwrap();
}

/// Sampled continuously, a leaking program's dashboard charts the leaking function's live memory over time,
/// with no run started; the panel is hidden until something grew.
#[tokio::test(flavor = "current_thread")]
async fn sampled_continuously_the_dashboard_charts_the_growing_function() {
    let program = Program::explained(&["leak"]).env("MEMPROF_SAMPLING", "continuous").spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let Some((_driver, client)) = open_dashboard(&program).await else { return };
    assert_eq!(
        client.execute("return document.getElementById('growing-panel').hidden;", vec![]).await.unwrap(),
        true,
        "nothing grew yet"
    );
    let status =
        "const said = document.getElementById('status').textContent; return said.startsWith('Sampling') && said;";
    let said = wait_for(&client, "the status", status).await;
    assert_eq!(said, "Sampling continuously (runs are windows over it)");
    // Sampling is never switched on or off: the dashboard offers neither (it offered "Switch sampling on").
    let switches = "return ['activate', 'deactivate'].map(id => document.getElementById(id).hidden);";
    assert_eq!(client.execute(switches, vec![]).await.unwrap(), serde_json::json!([true, true]));
    let line = "return document.querySelector('#growing-chart polyline[data-series=\"explained::leak_slowly\"]');";
    wait_for(&client, "the growing function's line", line).await;
    let legend = client.find(Locator::Id("growing-legend")).await.unwrap().text().await.unwrap();
    assert!(legend.starts_with("explained::leak_slowly ") && legend.contains(" MiB"), "{legend}");
    // What it grew by, with its sampling error, as explain and /metrics give it.
    assert!(legend.contains(" (grew ") && legend.contains(" MiB +- "), "{legend}");
    screenshot(&client, "dashboard-growing").await;
    client.close().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn with_profiling_disabled_the_dashboard_says_so_and_offers_no_run() {
    let service = Program::service().env("MALLOC_CONF", "prof:false").spawn();
    let Some((_driver, client)) = open_dashboard(&service).await else { return };

    let banner = wait_for(&client, "the banner", "return document.getElementById('banner').textContent || null;").await;
    assert!(banner.as_str().unwrap().starts_with("Heap profiling is disabled in this process"), "{banner}");
    let disabled = client.execute("return document.getElementById('start').disabled;", vec![]).await.unwrap();
    assert_eq!(disabled, true);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn after_a_kill_the_restarted_services_dashboard_shows_the_heap_before_it() {
    let scratch = memprof_tests::tools::Scratch::new("dashboard-earlier");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    // On demand: the killed process kept its run alone (sampled continuously, automatic dumps are kept
    // beside it, and the newest profile may be one of them).
    let mut killed = Program::service().env("MEMPROF_DIR", &parent).env("MEMPROF_SAMPLING", "on-demand").spawn();
    let id = memprof_tests::acceptance::start(&killed, "2secs");
    memprof_tests::acceptance::wait_until_idle(&killed);
    let pid = killed.pid();
    killed.signal("KILL");
    killed.wait_for_exit();

    let service = Program::service().env("MEMPROF_DIR", &parent).env("MEMPROF_SAMPLING", "on-demand").spawn();
    let Some((_driver, client)) = open_dashboard(&service).await else { return };
    let summary = "return !document.getElementById('earlier-panel').hidden \
                   && document.getElementById('earlier-summary').textContent;";
    let summary = wait_for(&client, "the earlier process", summary).await;
    let summary = summary.as_str().unwrap();
    let killed_without_cleaning_up = format!(
        "The previous process ({pid}) was killed or crashed: it ended without cleaning up. It was last seen with "
    );
    assert!(summary.starts_with(&killed_without_cleaning_up), "{summary}");
    assert!(summary.contains(" Its newest profile (http) was taken "), "{summary}");
    wait_for(&client, "its profile", &format!("return document.getElementById('earlier-{id}');")).await;
    let shown = format!("return document.getElementById('flamegraph').getAttribute('data-run') === '{id}';");
    wait_for(&client, "its flame graph", &shown).await;
    client.enter_frame(0).await.unwrap();
    let flame_graph = client.source().await.unwrap();
    assert!(flame_graph.contains("open_session"), "{flame_graph}");
    client.enter_parent_frame().await.unwrap();
    screenshot(&client, "dashboard-earlier").await;

    client.find(Locator::Id("clear-earlier")).await.unwrap().click().await.unwrap();
    wait_for(&client, "the panel to go", "return document.getElementById('earlier-panel').hidden;").await;
    let message = client.find(Locator::Id("message")).await.unwrap().text().await.unwrap();
    assert_eq!(message, "Deleted 1 profile of earlier processes");
    client.close().await.unwrap();
}
