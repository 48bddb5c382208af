//! Guided scenarios: conformance vector files whose steps carry a note, replayed step by step
//! with the note in the log (`web-demo/guides/guides.json`, built into the page).

use super::Playground;

/// The guided scenarios, a vector file like any other (every runner accepts it).
pub const GUIDES: &str = include_str!("../../guides/guides.json");

/// The label the log and the replay status give the guides.
const LABEL: &str = "guided scenarios";

impl Playground {
    /// The names of the guided scenarios, in order.
    #[must_use]
    pub fn guide_names() -> Vec<String> {
        lock_conformance::parse_file(LABEL, GUIDES)
            .map(|f| f.file.scenarios.iter().map(|s| s.name.clone()).collect())
            .unwrap_or_default()
    }

    /// Starts guided scenario `index` for step-by-step replay.
    ///
    /// # Errors
    /// No such guide (or a guide file the loader refuses, which a test rules out).
    pub fn open_guide(&mut self, index: usize) -> Result<(), String> {
        self.import(LABEL, GUIDES)?;
        self.choose_scenario(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::LineKind;

    #[test]
    fn every_guide_replays_as_expected_and_explains_every_step() {
        let names = Playground::guide_names();
        assert_eq!(names.len(), 11, "{names:?}");
        for (i, name) in names.iter().enumerate() {
            let mut p = Playground::new();
            p.open_guide(i).unwrap();
            let mut steps = 0;
            while let Some(ok) = p.replay_step() {
                assert!(ok, "{name}: {:?}", p.log.last());
                steps += 1;
            }
            let notes = p.log.iter().filter(|l| l.kind == LineKind::Guide).count();
            assert_eq!(
                notes,
                steps + 1,
                "{name}: a description and a note per step"
            );
        }
        let mut p = Playground::new();
        assert!(p.open_guide(names.len()).is_err());
    }
}
