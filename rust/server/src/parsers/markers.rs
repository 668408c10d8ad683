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
}
