//! Shareable links: the session's scenario (the same vector file *Export* writes) compressed
//! (deflate) and base64url-encoded in the URL fragment, so the link carries everything and no
//! server sees it. Opening the link imports the scenario for replay.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::Playground;

/// The fragment prefix of a shared scenario: `#s=<base64url(deflate(vector file))>`.
pub const FRAGMENT_PREFIX: &str = "s=";

/// The largest scenario a link may expand to (a link is untrusted input).
pub const MAX_SHARED_BYTES: usize = 4 << 20;

impl Playground {
    /// The URL fragment (without `#`) that carries this session's scenario.
    #[must_use]
    pub fn share_fragment(&self) -> String {
        let file = self.export();
        let packed = miniz_oxide::deflate::compress_to_vec(file.as_bytes(), 9);
        format!("{FRAGMENT_PREFIX}{}", URL_SAFE_NO_PAD.encode(packed))
    }

    /// Imports the scenario a shared link's fragment (without `#`) carries, for replay.
    ///
    /// # Errors
    /// Why the fragment is not a scenario: not ours, not base64url, not deflate, too large, not
    /// UTF-8, or a vector file the loader refuses (its message).
    pub fn open_fragment(&mut self, fragment: &str) -> Result<(), String> {
        let data = fragment
            .strip_prefix(FRAGMENT_PREFIX)
            .ok_or("the link carries no scenario")?;
        let packed = URL_SAFE_NO_PAD
            .decode(data)
            .map_err(|e| format!("the link's scenario is damaged (base64: {e})"))?;
        let bytes = miniz_oxide::inflate::decompress_to_vec_with_limit(&packed, MAX_SHARED_BYTES)
            .map_err(|e| {
            format!(
                "the link's scenario is damaged or too large ({:?})",
                e.status
            )
        })?;
        let text = String::from_utf8(bytes).map_err(|_| "the link's scenario is not text")?;
        self.import("shared link", &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{Action, Field};

    #[test]
    fn a_link_carries_the_session_and_replays_it_unchanged() {
        let mut p = Playground::new();
        p.set_field(1, Field::Ttl, Some("1000")).unwrap();
        p.act(1, Action::TryAcquire).unwrap();
        p.act(2, Action::Acquire).unwrap();
        p.step(1000);
        p.act(1, Action::Release).unwrap();
        let fragment = p.share_fragment();
        assert!(fragment.starts_with("s="));
        assert!(
            fragment.len() < p.export().len(),
            "compressed: {} vs {}",
            fragment.len(),
            p.export().len()
        );
        let mut q = Playground::new();
        q.open_fragment(&fragment).unwrap();
        let mut steps = 0;
        while let Some(ok) = q.replay_step() {
            assert!(ok, "{:?}", q.log.last());
            steps += 1;
        }
        assert_eq!(steps, p.recorded_steps());
    }

    #[test]
    fn a_damaged_or_foreign_link_is_refused_with_a_reason() {
        let mut p = Playground::new();
        let good = p.share_fragment();
        assert_eq!(
            p.open_fragment("x=1").unwrap_err(),
            "the link carries no scenario"
        );
        assert!(p.open_fragment("s=***").unwrap_err().contains("base64"));
        let cut = &good[..good.len() / 2];
        assert!(p.open_fragment(cut).unwrap_err().contains("damaged"));
        // A small link that would expand past the bound is refused before it is expanded.
        let bomb = miniz_oxide::deflate::compress_to_vec(&vec![b' '; MAX_SHARED_BYTES + 1], 9);
        let bomb = format!("s={}", URL_SAFE_NO_PAD.encode(bomb));
        assert!(bomb.len() < 20_000);
        assert!(p.open_fragment(&bomb).unwrap_err().contains("too large"));
        // Valid compression of something that is not a vector file: the loader's reason.
        let junk = format!(
            "s={}",
            URL_SAFE_NO_PAD.encode(miniz_oxide::deflate::compress_to_vec(b"{}", 9))
        );
        assert!(p
            .open_fragment(&junk)
            .unwrap_err()
            .starts_with("shared link: "));
        assert!(p.replay.is_none(), "nothing was imported");
    }
}
