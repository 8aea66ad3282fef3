//! Labels from `tracing`: a `tracing_subscriber` layer that labels the allocations made inside a span
//! with the span's name and chosen fields, so that services that `.instrument()` their tasks and enter
//! spans around their work get labels without new code.

use std::cell::RefCell;
use std::fmt::Debug;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id};
use tracing_core::{Subscriber, span};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::in_force::replace;
use super::table;

/// What the tracing layer keeps of itself: when it was added, and whether a span labelled yet.
struct Spans {
    /// When the first label layer was added to a subscriber, and the fields it chose.
    added: OnceLock<(Instant, String)>,
    /// Whether a label layer labelled a span with one of its chosen fields (any span, for a layer that chose
    /// none): set once, then only read, so that spans made on many threads never share a written cache line.
    labelled_a_span: AtomicBool,
}

static SPANS: Spans = Spans { added: OnceLock::new(), labelled_a_span: AtomicBool::new(false) };

/// The label set of a span, kept in its extensions.
struct SpanLabels(u32);

/// How long a layer may label nothing while allocations are sampled before `state` says why.
pub(crate) const SILENT_FOR: Duration = Duration::from_secs(60);

thread_local! {
    /// The label sets the spans entered on this thread replaced, innermost last.
    static REPLACED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// A `tracing_subscriber` layer: allocations made while a span is entered are labelled `span=<its
/// name>`, plus `<field>=<value>` for each of the chosen fields the span was created with; a span inside
/// another adds to (and overrides) its parent's labels.
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt;
/// use tracing_subscriber::util::SubscriberInitExt;
///
/// tracing_subscriber::registry().with(memprof_runtime::labels::LabelLayer::with_fields(["tenant"])).init();
/// let span = tracing::info_span!("request", tenant = "acme");
/// let session = span.in_scope(|| vec![0u8; 64 * 1024]); // labelled span=request, tenant=acme
/// # drop(session);
/// ```
///
/// The span's fields are read when it is created; values recorded later are not labels. As any label,
/// choose fields whose values repeat (a tenant, a route), not ones that never do (a request id).
#[derive(Debug, Clone, Default)]
pub struct LabelLayer {
    fields: Vec<&'static str>,
}

impl LabelLayer {
    /// Labels with the span's name only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Labels with the span's name and these fields of it.
    pub fn with_fields(fields: impl IntoIterator<Item = &'static str>) -> Self {
        Self { fields: fields.into_iter().collect() }
    }
}

/// Collects the chosen fields' values as text.
struct Fields<'a> {
    wanted: &'a [&'static str],
    found: Vec<(&'static str, String)>,
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.wanted.contains(&field.name()) {
            self.found.push((field.name(), value.to_owned()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if self.wanted.contains(&field.name()) {
            self.found.push((field.name(), format!("{value:?}")));
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for LabelLayer {
    fn on_layer(&mut self, _subscriber: &mut S) {
        let _ = SPANS.added.set((Instant::now(), self.fields.join(", ")));
    }

    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, context: Context<'_, S>) {
        let Some(span) = context.span(id) else { return };
        let parent = span.parent().and_then(|parent| parent.extensions().get::<SpanLabels>().map(|labels| labels.0));
        let mut fields = Fields { wanted: &self.fields, found: Vec::new() };
        attributes.record(&mut fields);
        if (self.fields.is_empty() || !fields.found.is_empty()) && !SPANS.labelled_a_span.load(Ordering::Relaxed) {
            SPANS.labelled_a_span.store(true, Ordering::Relaxed);
        }
        let mut pairs: Vec<(&str, &str)> = vec![("span", attributes.metadata().name())];
        pairs.extend(fields.found.iter().map(|(key, value)| (*key, value.as_str())));
        let labels = table::intern(parent.unwrap_or(0), &pairs);
        span.extensions_mut().insert(SpanLabels(labels));
    }

    fn on_enter(&self, id: &span::Id, context: Context<'_, S>) {
        let Some(labels) =
            context.span(id).and_then(|span| span.extensions().get::<SpanLabels>().map(|labels| labels.0))
        else {
            return;
        };
        let replaced = replace(labels);
        let _ = REPLACED.try_with(|stack| stack.borrow_mut().push(replaced));
    }

    fn on_exit(&self, id: &span::Id, context: Context<'_, S>) {
        let labelled = context.span(id).is_some_and(|span| span.extensions().get::<SpanLabels>().is_some());
        if let Some(replaced) = REPLACED.try_with(|stack| stack.borrow_mut().pop()).ok().flatten().filter(|_| labelled)
        {
            replace(replaced);
        }
    }
}

/// Why the label layer labels nothing, when it was added to a subscriber at least [`SILENT_FOR`] ago and
/// has labelled no span since, while allocations are `sampled`.
pub(crate) fn silence(sampled: bool) -> Option<String> {
    let (added, fields) = SPANS.added.get()?;
    judge_silence(added.elapsed(), SPANS.labelled_a_span.load(Ordering::Relaxed), fields, sampled)
}

/// [`silence`] over its readings: how long ago the layer was added, whether it labelled a span, its fields.
fn judge_silence(added: Duration, labelled: bool, fields: &str, sampled: bool) -> Option<String> {
    if !sampled || labelled || added < SILENT_FOR {
        return None;
    }
    let carried = if fields.is_empty() { String::new() } else { format!(" carrying its fields ({fields})") };
    Some(format!(
        "The tracing LabelLayer has labelled nothing in the {} s since it was added: no span{carried} reached it, so every allocation is labelled (none). A filter on the whole subscriber (RUST_LOG=warn through an EnvFilter, a LevelFilter added with .with(filter)) disables the spans it reads: give the filter to the other layers alone (fmt::layer().with_filter(filter)), see docs/labels.md",
        added.as_secs()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn a_layer_that_labelled_nothing_for_a_minute_of_sampling_is_said_with_the_fix() {
        let minute = SILENT_FOR;
        assert_eq!(judge_silence(minute, false, "tenant", false), None, "nothing sampled, nothing lost");
        assert_eq!(judge_silence(minute, true, "tenant", true), None);
        assert_eq!(judge_silence(minute / 2, false, "tenant", true), None, "too soon to tell");
        let said = judge_silence(minute, false, "tenant", true).unwrap();
        assert!(said.contains("no span carrying its fields (tenant) reached it") && said.contains(".with_filter("));
        assert!(judge_silence(minute, false, "", true).unwrap().contains("no span reached it"));
    }

    #[test]
    fn an_entered_span_labels_with_its_name_and_fields_and_its_exit_restores() {
        let subscriber = tracing_subscriber::registry().with(LabelLayer::with_fields(["tenant"]));
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!("request", tenant = "acme-tracing-test", id = 7);
            outer.in_scope(|| {
                let set = table::snapshot().get(super::super::in_force::current()).cloned().unwrap();
                assert_eq!(set.to_string(), "span=request,tenant=acme-tracing-test");
                tracing::info_span!("render").in_scope(|| {
                    let set = table::snapshot().get(super::super::in_force::current()).cloned().unwrap();
                    assert_eq!(set.to_string(), "span=render,tenant=acme-tracing-test");
                });
                let set = table::snapshot().get(super::super::in_force::current()).cloned().unwrap();
                assert_eq!(set.get("span"), Some("request"));
            });
            assert_eq!(super::super::in_force::current(), 0);
        });
    }
}
