//! The fast encoder against the `tokenizers` pipeline on the same `tokenizer.json`:
//! the DeepSeek tokenizer as shipped, and the same vocabulary behind the GPT-2 and
//! Llama 3 / Qwen2 pre-tokenizers, on generated text built to hit every regex branch,
//! every kind of whitespace, added tokens and long pieces.

use std::sync::OnceLock;

use serde_json::{json, Value};

use super::FastEncoder;
use crate::tokenizer::tests::deepseek_dir;

const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn deepseek_json() -> &'static Value {
    static JSON: OnceLock<Value> = OnceLock::new();
    JSON.get_or_init(|| {
        let text = std::fs::read_to_string(deepseek_dir().join("tokenizer.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

/// The HF tokenizer and the fast encoder for one `tokenizer.json`.
fn pair(json: &Value) -> (tokenizers::Tokenizer, FastEncoder) {
    let hf: tokenizers::Tokenizer = json.to_string().parse().unwrap();
    let fast = FastEncoder::new(json, &hf.get_added_tokens_decoder()).unwrap();
    (hf, fast)
}

fn with_pre_tokenizer(pre_tokenizer: Value) -> Value {
    let mut json = deepseek_json().clone();
    json["pre_tokenizer"] = pre_tokenizer;
    json
}

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const PIECES: &[&str] = &[
    "the",
    "The",
    "QUICK",
    "brown",
    "fox",
    "naïve",
    "café",
    "Ǆungla",
    "x",
    "I",
    "a",
    "'s",
    "'S",
    "'t",
    "'re",
    "'VE",
    "'m",
    "'ll",
    "'LL",
    "'d",
    "’s",
    "don't",
    "0",
    "7",
    "42",
    "123",
    "2024",
    "31415926",
    "١٢٣",
    "Ⅻ",
    "½",
    "１２３",
    ",",
    ".",
    "!",
    "?",
    "...",
    ";",
    ":",
    "-",
    "--",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    "<",
    ">",
    "/",
    "\\",
    "@",
    "#",
    "$",
    "%",
    "^",
    "&",
    "*",
    "_",
    "=",
    "+",
    "|",
    "~",
    "`",
    "€",
    "£",
    "©",
    "™",
    "→",
    "∑",
    "√",
    " ",
    " ",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    " \n",
    "\n ",
    "\t\n",
    "\u{3000}",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\u{85}",
    "\u{b}",
    "\u{c}",
    "\u{2009}",
    "\u{200b}",
    "\u{feff}",
    "日本語",
    "中文",
    "文本",
    "测试",
    "の",
    "テキスト",
    "カタカナ",
    "ひらがな",
    "한국어",
    "Ωμέγα",
    "Привет",
    "עברית",
    "العربية",
    "हिन्दी",
    "ไทย",
    "🎉",
    "🦀",
    "👩‍👩‍👧",
    "🇫🇷",
    "❤️",
    "\u{301}",
    "e\u{301}",
    "\u{308}",
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<|EOT|>",
    "<think>",
    "</think>",
    "<｜",
    "｜>",
    "<|",
    "|>",
    "<｜fim▁hole｜>",
];

/// A random text of up to `max` pieces, with occasional long runs of one piece.
fn text(rng: &mut Rng, max: usize) -> String {
    let mut out = String::new();
    for _ in 0..rng.below(max + 1) {
        let piece = rng.pick(PIECES);
        let repeat = if rng.below(40) == 0 {
            10 + rng.below(90)
        } else {
            1
        };
        for _ in 0..repeat {
            out.push_str(piece);
        }
    }
    out
}

/// The fast encoder gives HF's ids, or declines text its NFC normalizer would change.
fn assert_same(hf: &tokenizers::Tokenizer, fast: &FastEncoder, text: &str) {
    let want = hf.encode_fast(text, false).unwrap();
    match fast.encode(text) {
        Some(ids) => assert_eq!(ids, want.get_ids(), "text {text:?}"),
        None => assert!(
            fast.nfc && !unicode_normalization_alignments::is_nfc(text),
            "declined {text:?}"
        ),
    }
}

fn check_generated(json: &Value, seed: u64, count: usize) {
    let (hf, fast) = pair(json);
    let mut rng = Rng(seed);
    for _ in 0..count {
        assert_same(&hf, &fast, &text(&mut rng, 40));
    }
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn deepseek_gives_tokenizers_ids_on_generated_text() {
    check_generated(deepseek_json(), 0x9e37_79b9_7f4a_7c15, 3000);
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn deepseek_gives_tokenizers_ids_on_decoded_random_tokens() {
    // What `vrs bench serve --dataset random` sends: random ids decoded to text.
    let (hf, fast) = pair(deepseek_json());
    let mut rng = Rng(7);
    for _ in 0..300 {
        let ids: Vec<u32> = (0..64).map(|_| rng.below(128_000) as u32).collect();
        let text = hf.decode(&ids, false).unwrap();
        assert_same(&hf, &fast, &text);
    }
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn gpt2_pre_tokenizer_gives_tokenizers_ids() {
    let json = with_pre_tokenizer(
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}),
    );
    check_generated(&json, 11, 1500);
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn qwen2_pre_tokenizer_gives_tokenizers_ids() {
    let json = with_pre_tokenizer(json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
    ]}));
    check_generated(&json, 13, 1500);
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn nfc_normalizer_encodes_nfc_text_and_declines_the_rest() {
    // Qwen2's shape: NFC, then the Qwen2 split.
    let mut json = with_pre_tokenizer(json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
    ]}));
    json["normalizer"] = json!({"type": "NFC"});
    check_generated(&json, 19, 1500);
    let (hf, fast) = pair(&json);
    assert!(fast.nfc);
    let composed = "caf\u{e9} na\u{ef}ve \u{c5}ngstr\u{f6}m";
    assert_same(&hf, &fast, composed);
    assert!(fast.encode(composed).is_some());
    // Decomposed text changes under NFC: HF's path, not a wrong answer.
    assert!(fast.encode("cafe\u{301}").is_none());
    assert_ne!(
        hf.encode_fast("cafe\u{301}", false).unwrap().get_ids(),
        pair(deepseek_json()).1.encode("cafe\u{301}").unwrap()
    );
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn ignore_merges_takes_whole_words_from_the_vocabulary() {
    let mut json = deepseek_json().clone();
    json["model"]["ignore_merges"] = json!(true);
    check_generated(&json, 17, 1000);
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn long_pieces_merge_like_short_ones() {
    // Pieces over the scan limit go through the heap; both must agree with tokenizers.
    let (hf, fast) = pair(deepseek_json());
    for text in [
        "a".repeat(300),
        "ab".repeat(150),
        "日本語のテキスト".repeat(40),
        "x".repeat(65) + &"y".repeat(64),
        " ".repeat(200) + "z",
        "🦀".repeat(70),
    ] {
        assert_same(&hf, &fast, &text);
    }
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn shapes_it_cannot_match_exactly_are_refused() {
    let refused = |json: Value| {
        let hf: tokenizers::Tokenizer = json.to_string().parse().unwrap();
        FastEncoder::new(&json, &hf.get_added_tokens_decoder())
            .err()
            .unwrap()
    };
    let mut nfkc = deepseek_json().clone();
    nfkc["normalizer"] = json!({"type": "NFKC"});
    assert!(refused(nfkc).contains("normalizer"));
    let mut dropout = deepseek_json().clone();
    dropout["model"]["dropout"] = json!(0.1);
    assert!(refused(dropout).contains("dropout"));
    let mut lstrip = deepseek_json().clone();
    lstrip["added_tokens"][0]["lstrip"] = json!(true);
    assert!(refused(lstrip).contains("strip"));
    let mut truncation = deepseek_json().clone();
    truncation["truncation"] =
        json!({"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0});
    assert!(refused(truncation).contains("truncation"));
    let lookbehind = with_pre_tokenizer(json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?<=a)b"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
    ]}));
    assert!(refused(lookbehind).contains("look-around"));
    let removed = with_pre_tokenizer(json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
    ]}));
    assert!(refused(removed).contains("pre-tokenizer step"));
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn the_probe_check_catches_a_wrong_encoder() {
    // An encoder built for another pre-tokenizer disagrees with the shipped tokenizer.
    let gpt2 = with_pre_tokenizer(
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}),
    );
    let (_, wrong) = pair(&gpt2);
    let (hf, right) = pair(deepseek_json());
    assert!(right.agrees_with(&hf).is_ok());
    assert!(wrong.agrees_with(&hf).unwrap_err().contains("ids differ"));
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn a_bos_adding_post_processor_applies_to_fast_ids() {
    // Llama 3's shape: TemplateProcessing puts BOS in front when special tokens are asked.
    let mut json = deepseek_json().clone();
    json["post_processor"] = json!({
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<｜begin▁of▁sentence｜>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<｜begin▁of▁sentence｜>": {
            "id": "<｜begin▁of▁sentence｜>", "ids": [0], "tokens": ["<｜begin▁of▁sentence｜>"]}}
    });
    let dir = std::env::temp_dir().join(format!("vrs-bos-tokenizer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, json.to_string()).unwrap();
    let config = crate::TokenizerConfig::from_json(&json!({})).unwrap();
    let tok = crate::Tokenizer::from_file(&path, config).unwrap();
    assert!(tok.fast_encoder().is_ok());
    let hf: tokenizers::Tokenizer = json.to_string().parse().unwrap();
    for text in ["Hello world", "", "日本語 <｜User｜> 12345"] {
        for special in [false, true] {
            let want = hf.encode_fast(text, special).unwrap();
            assert_eq!(
                tok.encode(text, special).unwrap(),
                want.get_ids(),
                "{text:?} {special}"
            );
        }
    }
    assert_eq!(tok.encode("Hi", true).unwrap()[0], 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn concurrent_encodes_share_the_encoder_safely() {
    // Each call takes a set of regex caches from the shared stack and puts it back.
    let (hf, fast) = pair(deepseek_json());
    let mut rng = Rng(23);
    let texts: Vec<String> = (0..400).map(|_| text(&mut rng, 30)).collect();
    let want: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| {
            hf.encode_fast(t.as_str(), false)
                .unwrap()
                .get_ids()
                .to_vec()
        })
        .collect();
    std::thread::scope(|scope| {
        for offset in 0..4 {
            let (fast, texts, want) = (&fast, &texts, &want);
            scope.spawn(move || {
                for i in (0..texts.len()).map(|i| (i + offset * 97) % texts.len()) {
                    assert_eq!(fast.encode(&texts[i]).as_deref(), Some(&want[i][..]));
                }
            });
        }
    });
    assert!(!fast.caches.lock().unwrap().is_empty());
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn every_code_point_splits_as_onig_splits_it() {
    // The regex crate and onig must agree on every character class the patterns use
    // (`\p{L}`, `\p{N}`, `\s`, case folding in `(?i:'s)`...): both carry Unicode 16 tables
    // today, and this catches a future version skew. Each scalar value is tried next to a
    // letter, itself, a digit, an apostrophe and spaces, 48 values per text.
    let qwen2 = with_pre_tokenizer(json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
    ]}));
    let scalars: Vec<char> = (0..=0x10_ffff_u32).filter_map(char::from_u32).collect();
    for json in [deepseek_json(), &qwen2] {
        let (hf, fast) = pair(json);
        for chunk in scalars.chunks(48) {
            let mut text = String::new();
            for &c in chunk {
                text.extend([c, 'x', c, c, '1', c, '\'', c, ' ', c, ' ', ' ']);
            }
            assert_same(&hf, &fast, &text);
        }
    }
}
