//! Analyses made from analyses: one label's samples, the bytes under each label, and the difference of two
//! profiles.

use std::collections::BTreeMap;

use super::model::{Analysis, Location, Sample};
use crate::labels::NO_LABEL;

impl Analysis {
    /// Only the samples whose label `key` is `value`; with `value` [`NO_LABEL`], those without `key`.
    ///
    /// ```
    /// let analysis = memprof_analysis::Analysis::default();
    /// assert!(analysis.only_labelled("tenant", "acme").samples.is_empty());
    /// ```
    pub fn only_labelled(&self, key: &str, value: &str) -> Analysis {
        let mut only = self.clone();
        only.samples.retain(|sample| sample.labels.get(key).unwrap_or(NO_LABEL) == value);
        // The size classes were counted whole for the whole heap, not for one label's share.
        only.calibrated = None;
        only
    }

    /// The estimated live bytes under each value of each label key ([`NO_LABEL`] for the samples without
    /// the key): what `?by=KEY` splits, for every key at once.
    ///
    /// ```
    /// assert!(memprof_analysis::Analysis::default().bytes_by_label().is_empty());
    /// ```
    pub fn bytes_by_label(&self) -> BTreeMap<String, BTreeMap<String, f64>> {
        let mut keys: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for key in self.samples.iter().flat_map(|sample| sample.labels.iter().map(|(key, _)| key)) {
            if !keys.contains_key(key) {
                keys.insert(key.to_owned(), BTreeMap::new());
            }
        }
        for (key, values) in &mut keys {
            for sample in &self.samples {
                let value = sample.labels.get(key).unwrap_or(NO_LABEL);
                *values.entry(value.to_owned()).or_default() += sample.bytes;
            }
        }
        keys
    }

    /// What grew from `base` to `self`: both profiles' samples, `base`'s with negated counts (as
    /// `jeprof --base` and `pprof -diff_base` compute it).
    pub fn minus(&self, base: &Analysis) -> Analysis {
        let mut difference = self.clone();
        let (location_offset, module_offset) = (self.locations.len(), self.modules.len());
        difference.modules.extend(base.modules.iter().cloned());
        difference.locations.extend(base.locations.iter().map(|location| Location {
            module: location.module.map(|module| module + module_offset),
            ..location.clone()
        }));
        difference.samples.extend(base.samples.iter().map(|sample| Sample {
            locations: sample.locations.iter().map(|location| location + location_offset).collect(),
            objects: -sample.objects,
            bytes: -sample.bytes,
            allocated_objects: -sample.allocated_objects,
            allocated_bytes: -sample.allocated_bytes,
            labels: sample.labels.clone(),
        }));
        difference.cautions.extend(base.cautions.iter().cloned());
        // Where both variances are known, the difference's is their sum (the samples are independent).
        difference.known_variance = self.known_variance.zip(base.known_variance).map(|(one, other)| one + other);
        // What two calibrations left out does not subtract.
        difference.calibrated = None;
        difference
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::binaries::Binaries;
    use crate::heap_profile::{HeapProfile, Stack};
    use crate::labels::{LabelSets, label_address};

    #[test]
    fn a_difference_holds_both_profiles_samples_the_bases_negated() {
        let profile = |bytes: u64| HeapProfile {
            sample_period: 1,
            total: Default::default(),
            total_allocated: Default::default(),
            stacks: vec![Stack { addresses: vec![0x1000], objects: 1, bytes, allocated: Default::default() }],
            mappings: Vec::new(),
        };
        let (now, base) = (
            Analysis::new(&profile(3072), &Binaries::as_mapped()),
            Analysis::new(&profile(1024), &Binaries::as_mapped()),
        );
        let difference = now.minus(&base);
        assert_eq!(difference.samples.len(), 2);
        assert_eq!(difference.locations.len(), 2, "the base's locations follow the profile's");
        assert_eq!(difference.samples[1].locations, [1]);
        assert_eq!(difference.total().1, now.total().1 - base.total().1);
        assert!(difference.samples[1].bytes < 0.0);
    }

    #[test]
    fn samples_are_kept_and_counted_by_label_value() {
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", "acme")]);
        let analysis = crate::fixtures::labelled_analysis(
            &[&[0x1000, label_address(1)], &[0x2000], &[0x3000, label_address(1)]],
            &sets,
        );
        assert_eq!(analysis.only_labelled("tenant", "acme").samples.len(), 2);
        assert_eq!(analysis.only_labelled("tenant", NO_LABEL).samples.len(), 1);
        let by_label = analysis.bytes_by_label();
        assert_eq!(by_label["tenant"], BTreeMap::from([("acme".to_owned(), 2048.0), (NO_LABEL.to_owned(), 1024.0)]));
    }

    /// A tenant that calls itself "(none)" (the value came from a client's header) is not the samples
    /// without a tenant: split, filtered and tagged apart, in every format.
    #[test]
    fn a_value_spelling_no_label_stays_apart_from_no_label() {
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", NO_LABEL)]);
        let analysis = crate::fixtures::labelled_analysis(&[&[0x1000, label_address(1)], &[0x2000]], &sets);
        assert_eq!(analysis.only_labelled("tenant", NO_LABEL).samples.len(), 1);
        assert_eq!(analysis.only_labelled("tenant", crate::labels::NO_LABEL_SPELLED).samples.len(), 1);
        let by_label = analysis.bytes_by_label();
        let apart = [(NO_LABEL.to_owned(), 1024.0), (crate::labels::NO_LABEL_SPELLED.to_owned(), 1024.0)];
        assert_eq!(by_label["tenant"], BTreeMap::from(apart));
        let options = crate::RenderOptions { by: Some("tenant".to_owned()), ..crate::RenderOptions::default() };
        let collapsed = crate::Format::Collapsed.render(&analysis, None, &options).unwrap();
        let roots: Vec<&str> =
            std::str::from_utf8(&collapsed).unwrap().lines().map(|line| line.split(';').next().unwrap()).collect();
        assert_eq!(roots.len(), 2, "{roots:?}");
        assert!(roots.contains(&"tenant=(none)") && roots.contains(&"tenant=\"(none)\""), "{roots:?}");
        // A table read back (an earlier process's, a download's) keeps it apart too.
        let read = LabelSets::parse(&sets.to_text()).unwrap();
        assert_eq!(read.get(1).unwrap().get("tenant"), Some(crate::labels::NO_LABEL_SPELLED));
    }
}
