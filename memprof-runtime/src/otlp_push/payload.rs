//! An interval's export, made from the record of samples: what each stack allocated during the interval
//! (`alloc_objects`, `alloc_space`: a delta, as engines add intervals up) and what it holds at its end
//! (`inuse_objects`, `inuse_space`), unbiased, symbolized here (functions, files, lines), labels as
//! attributes, mappings with their build ids, the interval's start and length, and the resource.

use std::io::Write;
use std::time::SystemTime;

use memprof_analysis::{Analysis, Binaries, Format, RenderOptions};

use crate::sampler::record::{self, AllocatedByStack, table::Table};
use crate::settings::otlp::PushSettings;

/// The most bytes an export's body may have (compressed when configured): a larger one is dropped, said,
/// and counted, never sent (Collectors refuse bodies past their limit, 20 MiB by default for OTLP/HTTP).
pub(crate) const MOST_BODY_BYTES: usize = 16 << 20;

/// Where the next interval starts: the allocation totals and the time the last export ended at.
#[derive(Debug)]
pub(crate) struct Interval {
    before: AllocatedByStack,
    started: SystemTime,
}

impl Interval {
    /// The first interval, from now (sampling started at start-up, a moment before).
    pub(crate) fn first() -> Interval {
        Interval { before: Vec::new(), started: SystemTime::now() }
    }
}

/// An interval's export made: its body, and how many profiles it holds.
pub(crate) struct Made {
    pub(crate) body: Vec<u8>,
    pub(crate) profiles: usize,
}

/// Makes the export of the interval from `interval` to now, and moves `interval` on to now. Call on an
/// unsampled thread (memprof's own).
pub(crate) fn make(record: &Table, interval: &mut Interval, settings: &PushSettings) -> Result<Made, String> {
    let dump =
        record::interval_dump(record, &interval.before).map_err(|error| format!("cannot read the record: {error}"))?;
    let now = SystemTime::now();
    let mut analysis = Analysis::of_dump(&dump.text, &Binaries::this_process(), &crate::labels::table_now())
        .map_err(|error| format!("the record's dump is malformed: {error}"))?;
    // The four sample types every time, an interval without allocations too: engines see one series. The
    // counts are unbiased already; the period says how they were sampled.
    analysis.has_allocations = true;
    analysis.sample_period = crate::jemalloc::lg_sample().map_or(1, |lg_sample| 1 << lg_sample);
    let attributes = settings.resource.iter().cloned().chain(crate::process::resource::process_attributes());
    let attributes = attributes.chain([("memprof.version".to_owned(), env!("CARGO_PKG_VERSION").to_owned())]).collect();
    let mut sampling = crate::sampler::throttle::sampling_attributes();
    sampling.extend(dump.calibration.iter().flat_map(|calibration| calibration.attributes()));
    let resource = crate::process::resource::otlp_resource(attributes, sampling, interval.started, now);
    let options = RenderOptions { resource, ..RenderOptions::default() };
    let encoded = Format::Otlp.render(&analysis, None, &options).map_err(|error| error.to_string())?;
    let body = if settings.gzip { gzip(&encoded) } else { encoded };
    interval.before = dump.ends_at;
    interval.started = now;
    if body.len() > MOST_BODY_BYTES {
        return Err(format!(
            "the export is {} MiB, past the {} MiB an export may be",
            body.len() >> 20,
            MOST_BODY_BYTES >> 20
        ));
    }
    Ok(Made { body, profiles: 4 })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}
