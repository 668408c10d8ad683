//! One step of a choice's generation as the HTTP layer gets it from its
//! [`crate::output::generation::Generation`]: text, finish reason, logprobs and, when asked
//! for, the tokens' offsets and ids. Mirrors `Piece` in `server/output/generation.py`.

use vrs_wire::TokenLogprobs;

/// What the client gets next: text (never empty unless this is the last piece or the
/// first with the prompt's logprobs), the finish reason on the last, the logprobs of the
/// piece's visible tokens, and (first piece) the engine's prompt logprobs.
#[derive(Debug, Default, PartialEq)]
pub struct Piece {
    pub text: String,
    pub finish: Option<&'static str>,
    pub logprobs: Vec<TokenLogprobs>,
    pub prompt_logprobs: Option<Vec<TokenLogprobs>>,
    /// The stop string that ended the generation (on the last piece only).
    pub stop_sequence: Option<String>,
    /// With [`Generation::token_offsets`]: for each completion token this piece counts,
    /// the byte offset in the generation's whole text (every piece's text, before a stop
    /// string cut it) where the token's text begins; a token without text of its own (the
    /// stop token, or a byte of a character still incomplete) is at the text's end then.
    pub token_offsets: Vec<usize>,
    /// With [`Generation::token_ids`]: the completion tokens this piece counts.
    pub token_ids: Vec<u32>,
}

impl Piece {
    pub(crate) fn is_empty(&self) -> bool {
        self.text.is_empty() && self.logprobs.is_empty() && self.prompt_logprobs.is_none()
    }
}
