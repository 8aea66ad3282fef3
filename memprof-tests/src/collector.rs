//! The real OpenTelemetry Collector for tests of the OTLP push: `go/collector` (otelcol v0.165.0, its OTLP
//! receiver, and a `capture` exporter of its own that writes each export of profiles that reached it),
//! built from its module by [`crate::tools`] and started on a free loopback port, and what it received.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::process::{Launch, PATIENCE, Program};
use crate::tools::Scratch;
use crate::waiting::wait_until;

/// A running Collector; stopped when dropped.
pub struct Collector {
    program: Program,
    directory: Scratch,
    tls: bool,
}

impl Collector {
    /// Builds (once) and starts a Collector whose OTLP/HTTP receiver listens on a free loopback port and
    /// passes each request's `x-scope-orgid` on; `None` (with the reason printed) where Go is not installed.
    ///
    /// ```no_run
    /// if let Some(collector) = memprof_tests::collector::Collector::start() {
    ///     println!("push to {}", collector.endpoint());
    /// }
    /// ```
    pub fn start() -> Option<Collector> {
        Self::serving(None)
    }

    /// [`Collector::start`], serving TLS with the certificate and key of these PEM files (its endpoint is
    /// then `https://`).
    pub fn start_tls(certificate: &std::path::Path, key: &std::path::Path) -> Option<Collector> {
        Self::serving(Some((certificate, key)))
    }

    fn serving(tls: Option<(&std::path::Path, &std::path::Path)>) -> Option<Collector> {
        let program = crate::tools::go_program("collector")?;
        let directory = Scratch::new("collector");
        let config = directory.join("config.yaml");
        let received = directory.join("received");
        std::fs::create_dir(&received).unwrap();
        let tls = tls.map_or_else(String::new, |(certificate, key)| {
            format!(
                "        tls:\n          cert_file: {}\n          key_file: {}\n",
                certificate.display(),
                key.display()
            )
        });
        std::fs::write(
            &config,
            format!(
                "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:0\n        include_metadata: true\n{tls}\
                 exporters:\n  capture:\n    directory: {}\n\
                 service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [capture]\n",
                received.display()
            ),
        )
        .unwrap();
        let tls = !tls.is_empty();
        let program = Launch::new(program)
            .args(["--config", config.to_str().unwrap(), "--feature-gates=service.profilesSupport"])
            .serving_where_it_listens()
            .spawn();
        Some(Collector { program, directory, tls })
    }

    /// The base endpoint to push to (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.address())
    }

    /// Where its receiver listens.
    pub fn address(&self) -> SocketAddr {
        self.program.address()
    }

    /// What the Collector answers from now on: `""` takes every export, `"unavailable <seconds>"` answers
    /// 503 with that `Retry-After`, `"invalid"` answers 400.
    pub fn answer(&self, answer: &str) {
        std::fs::write(self.directory.join("received/answer"), answer).unwrap();
    }

    /// The exports received so far, in order of arrival (each an OTLP request, as pdata marshals it).
    pub fn exports(&self) -> Vec<PathBuf> {
        let mut numbered: Vec<(u64, PathBuf)> = std::fs::read_dir(self.directory.join("received"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter_map(|path| {
                let name = path.file_name()?.to_str()?.to_owned();
                let number = name.strip_prefix("export.")?.strip_suffix(".pb")?.parse().ok()?;
                Some((number, path))
            })
            .collect();
        numbered.sort();
        numbered.into_iter().map(|(_, path)| path).collect()
    }

    /// Waits until `count` exports arrived; they, in order.
    pub fn wait_for_exports(&self, count: usize) -> Vec<PathBuf> {
        wait_until(&format!("{count} exports at the Collector"), PATIENCE, || {
            let exports = self.exports();
            if exports.len() >= count { Ok(exports) } else { Err(format!("{} so far", exports.len())) }
        })
    }

    /// The `x-scope-orgid` header the export at `export` came with (empty without one).
    pub fn tenant_of(&self, export: &std::path::Path) -> String {
        std::fs::read_to_string(export.with_extension("tenant")).unwrap()
    }

    /// What the Collector printed.
    pub fn output(&self) -> Vec<String> {
        self.program.output()
    }
}
