//! Regex pre-tokenization (HF's `Split` with `Isolated` behaviour) on the `regex` crate's
//! DFA-backed engine instead of onig's backtracking.
//!
//! The only look-around the byte-level tokenizers use is GPT-2's `\s+(?!\S)|\s+` tail:
//! a whitespace run followed by a non-space gives its last character to the next piece.
//! Each top-level alternative becomes one pattern of a multi-pattern regex (leftmost-first
//! across patterns is alternation order), so the match says which alternative won, and a
//! win by the look-ahead alternative is shortened by hand. Patterns with any other
//! look-around, or that can match the empty string, are refused (the caller keeps HF).

use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input, PatternID};

const LOOKAHEAD: &str = r"\s+(?!\S)";
const WHITESPACE: &str = r"\s+";

/// GPT-2's pre-tokenizer pattern, used by `ByteLevel` with `use_regex: true`.
pub(crate) const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// One `Split` step: the matches of a pattern and the gaps between them.
pub(crate) struct Splitter {
    regex: Regex,
    /// The pattern that stands for `\s+(?!\S)`, when the regex has it.
    lookahead: Option<PatternID>,
}

impl Splitter {
    /// Compiles an onig pattern; `Err` says why it cannot run on the `regex` crate.
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        let alternatives = top_level_alternatives(pattern)?;
        let mut patterns = Vec::with_capacity(alternatives.len());
        let mut lookahead = None;
        for (i, alternative) in alternatives.iter().enumerate() {
            if *alternative == LOOKAHEAD {
                if alternatives[i + 1..] != [WHITESPACE] {
                    return Err(format!(
                        "{LOOKAHEAD} is not followed by a final |{WHITESPACE}"
                    ));
                }
                lookahead = Some(PatternID::new(i).map_err(|e| e.to_string())?);
                patterns.push(WHITESPACE);
                continue;
            }
            if ["(?=", "(?!", "(?<", "(?>", "\\G", "\\K"]
                .iter()
                .any(|s| alternative.contains(s))
            {
                return Err(format!("look-around or atomic group in {alternative:?}"));
            }
            let hir = regex_syntax::parse(alternative).map_err(|e| e.to_string())?;
            if hir.properties().minimum_len() == Some(0) {
                return Err(format!("{alternative:?} can match the empty string"));
            }
            patterns.push(alternative);
        }
        let regex = Regex::new_many(&patterns).map_err(|e| e.to_string())?;
        Ok(Self { regex, lookahead })
    }

    /// Search state for [`Splitter::split`]; one per thread at a time.
    pub(crate) fn cache(&self) -> Cache {
        self.regex.create_cache()
    }

    /// Appends the pieces of `text`: every match and every non-empty gap, in order.
    pub(crate) fn split<'t>(&self, text: &'t str, cache: &mut Cache, out: &mut Vec<&'t str>) {
        let mut done = 0;
        while done < text.len() {
            // Pieces are mostly back to back: an anchored search needs no reverse scan to
            // find where the match starts, and gives the same match when there is one here.
            let here = Input::new(text).range(done..);
            let found = self
                .regex
                .search_with(cache, &here.clone().anchored(Anchored::Yes))
                .or_else(|| self.regex.search_with(cache, &here));
            let Some(found) = found else {
                break;
            };
            let start = found.start();
            let mut end = found.end();
            if Some(found.pattern()) == self.lookahead && end < text.len() {
                // Greedy `\s+` stopped at a non-space: the look-ahead alternative matches
                // one character less, and a lone whitespace character falls through to the
                // final `\s+`, which is the same span.
                if let Some(last) = text[start..end].chars().next_back() {
                    if end - last.len_utf8() > start {
                        end -= last.len_utf8();
                    }
                }
            }
            if start > done {
                out.push(&text[done..start]);
            }
            out.push(&text[start..end]);
            done = end;
        }
        if done < text.len() {
            out.push(&text[done..]);
        }
    }
}

/// The `|`-separated alternatives at the top level of a pattern (outside groups and
/// character classes).
pub(crate) fn top_level_alternatives(pattern: &str) -> Result<Vec<&str>, String> {
    let bytes = pattern.as_bytes();
    let mut alternatives = Vec::new();
    let mut depth = 0usize;
    let mut class = 0usize;
    let mut begin = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'[' => {
                class += 1;
                // A `]` first in a class (after an optional `^`) is a literal.
                if bytes.get(i + 1) == Some(&b'^') {
                    i += 1;
                }
                if bytes.get(i + 1) == Some(&b']') {
                    i += 1;
                }
            }
            b']' if class > 0 => class -= 1,
            b'(' if class == 0 => depth += 1,
            b')' if class == 0 => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced ')' in {pattern:?}"))?;
            }
            b'|' if class == 0 && depth == 0 => {
                alternatives.push(&pattern[begin..i]);
                begin = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if depth != 0 || class != 0 {
        return Err(format!("unbalanced group or class in {pattern:?}"));
    }
    alternatives.push(&pattern[begin..]);
    Ok(alternatives)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(pattern: &str, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let splitter = Splitter::new(pattern).unwrap();
        splitter.split(text, &mut splitter.cache(), &mut out);
        out.into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn alternatives_respect_groups_classes_and_escapes() {
        let alts = top_level_alternatives(r"(?i:'s|'t)|[|\]]+|a\|b|[]|]").unwrap();
        assert_eq!(alts, [r"(?i:'s|'t)", r"[|\]]+", r"a\|b", "[]|]"]);
        assert!(top_level_alternatives("(a|b").is_err());
    }

    #[test]
    fn lookahead_tail_gives_the_last_space_to_the_next_word() {
        assert_eq!(pieces(GPT2_PATTERN, "a   b"), ["a", "  ", " b"]);
        assert_eq!(pieces(GPT2_PATTERN, "a b"), ["a", " b"]);
        assert_eq!(
            pieces(GPT2_PATTERN, "a \u{3000}b"),
            ["a", " ", "\u{3000}", "b"]
        );
        assert_eq!(pieces(GPT2_PATTERN, "a   "), ["a", "   "]);
        assert_eq!(pieces(GPT2_PATTERN, "x  !"), ["x", " ", " !"]);
        assert_eq!(pieces(GPT2_PATTERN, "it's 12"), ["it", "'s", " 12"]);
    }

    #[test]
    fn refuses_what_it_cannot_match_exactly() {
        assert!(Splitter::new(r"(?=a)b").is_err());
        assert!(Splitter::new(r"a*").is_err());
        assert!(Splitter::new(r"\s+(?!\S)|a").is_err());
        assert!(Splitter::new(r"\p{N}{1,3}").is_ok());
    }
}
