//! Marker hold-back for streaming parsers (tool calls, reasoning): the tail of a piece
//! that could be the start of a marker completed by the next piece waits. Mirrors
//! `server/parsers/markers.py`.

/// Length in bytes of the longest suffix of `text` that is a proper prefix of `marker`.
pub fn held_suffix(text: &str, marker: &str) -> usize {
    marker
        .char_indices()
        .rev()
        .map(|(n, _)| n)
        .take_while(|&n| n > 0)
        .find(|&n| text.ends_with(&marker[..n]))
        .unwrap_or(0)
}

/// Length in bytes of the longest suffix of `text` that is a proper prefix of any of
/// `markers` (what a parser looking for several markers must hold back).
pub fn held_suffix_any(text: &str, markers: &[&str]) -> usize {
    markers
        .iter()
        .map(|m| held_suffix(text, m))
        .max()
        .unwrap_or(0)
}

/// The earliest whole occurrence of any of `markers` in `text`: (byte offset, marker
/// length). At the same offset the longer marker wins.
pub fn find_any(text: &str, markers: &[&str]) -> Option<(usize, usize)> {
    markers
        .iter()
        .filter_map(|m| text.find(m).map(|at| (at, m.len())))
        .min_by_key(|&(at, len)| (at, std::cmp::Reverse(len)))
}

/// The last whole occurrence of any of `markers` in `text`: its byte offset.
pub fn rfind_any(text: &str, markers: &[&str]) -> Option<usize> {
    markers.iter().filter_map(|m| text.rfind(m)).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_proper_prefix_at_the_end() {
        assert_eq!(held_suffix("abc<thi", "<think>"), 4);
        assert_eq!(held_suffix("abc<", "<think>"), 1);
        assert_eq!(held_suffix("abc", "<think>"), 0);
        assert_eq!(
            held_suffix("<think>", "<think>"),
            0,
            "a whole marker is not held"
        );
        assert_eq!(
            held_suffix("x<｜tool", "<｜tool▁call▁begin｜>"),
            "<｜tool".len()
        );
        assert_eq!(held_suffix("", "<think>"), 0);
        assert_eq!(held_suffix("é", "<think>"), 0);
    }

    #[test]
    fn many_markers() {
        let ends = ["Here is my response:", "Here's my response:"];
        assert_eq!(held_suffix_any("x Here", &ends), 4);
        assert_eq!(held_suffix_any("x Here's my", &ends), "Here's my".len());
        assert_eq!(held_suffix_any("x", &ends), 0);
        assert_eq!(
            find_any("a [/THINK] b [THINK]", &["[THINK]", "[/THINK]"]),
            Some((2, 8))
        );
        assert_eq!(find_any("ab", &["[THINK]"]), None);
        assert_eq!(find_any("<ab>", &["<a", "<ab>"]), Some((0, 4)));
        assert_eq!(rfind_any("<a> <b> <a>", &["<a>", "<b>"]), Some(8));
        assert_eq!(rfind_any("", &["<a>"]), None);
    }
}
