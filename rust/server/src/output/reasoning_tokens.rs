//! A chat choice's reasoning tokens: each generated token placed by where its text begins
//! ([`crate::output::generation::Piece::token_offsets`]) against the reasoning parser's block;
//! a token the parser cannot place yet (its text held back as a possible marker, or not
//! pushed yet) waits for a later piece, or for the end. Mirrors
//! `server/output/reasoning_tokens.py`. Behaviour: docs/api.md, "Reasoning".

use std::collections::VecDeque;

use crate::parsers::reasoning::ReasoningParser;

/// The count so far, and the tokens not placed yet (offsets in increasing order).
#[derive(Debug, Default)]
pub struct ReasoningTokens {
    waiting: VecDeque<usize>,
    count: u32,
}

impl ReasoningTokens {
    /// Adds a piece's token `offsets` after `parser` took its text; `last`: the text is
    /// over (after [`ReasoningParser::finish`]), so every token is placed.
    pub fn count(&mut self, parser: &ReasoningParser, offsets: &[usize], last: bool) {
        self.waiting.extend(offsets);
        while let Some(&offset) = self.waiting.front() {
            let inside = if last {
                parser.final_side(offset)
            } else {
                match parser.side(offset) {
                    Some(inside) => inside,
                    None => break,
                }
            };
            self.count += u32::from(inside);
            self.waiting.pop_front();
        }
    }

    /// The tokens counted as reasoning so far.
    pub fn total(&self) -> u32 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    //! The shared case table `tests/parser_cases/reasoning_tokens.jsonl` (as
    //! `tests/server/test_reasoning_tokens.py`): each case's pieces and the places of their
    //! tokens, in characters (turned into bytes here), pushed through the parser.
    use serde::Deserialize;

    use super::*;
    use crate::parsers::reasoning::markers_of;

    const CASES: &str = include_str!("../../../../tests/parser_cases/reasoning_tokens.jsonl");

    #[derive(Debug, Deserialize)]
    struct Case {
        name: String,
        parser: String,
        prompt_inside: bool,
        pieces: Vec<(String, Vec<usize>)>,
        counts: Vec<u32>,
    }

    #[test]
    fn the_case_table() {
        let cases: Vec<Case> = CASES
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("a case of reasoning_tokens.jsonl"))
            .collect();
        assert!(cases.len() >= 8);
        for case in cases {
            let whole: String = case.pieces.iter().map(|(text, _)| text.as_str()).collect();
            let byte = |chars: usize| whole.char_indices().nth(chars).map_or(whole.len(), |c| c.0);
            let markers = markers_of(&case.parser).expect("a known parser");
            let mut parser = ReasoningParser::new(markers, case.prompt_inside);
            let mut tokens = ReasoningTokens::default();
            let mut counts = Vec::new();
            for (i, (text, offsets)) in case.pieces.iter().enumerate() {
                let last = i + 1 == case.pieces.len();
                parser.push(text);
                if last {
                    parser.finish();
                }
                let offsets: Vec<usize> = offsets.iter().map(|&o| byte(o)).collect();
                tokens.count(&parser, &offsets, last);
                counts.push(tokens.total());
            }
            assert_eq!(counts, case.counts, "{}", case.name);
        }
    }
}
