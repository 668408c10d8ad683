//! The OpenAI embeddings answer (`POST /v1/embeddings`): one JSON body, `data` holding an
//! entry per input, `usage.prompt_tokens` the tokens the server embedded.

use serde::de::IgnoredAny;
use serde::Deserialize;

/// The fields of an embeddings answer the benchmark reads; the vectors themselves are
/// left unparsed.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    data: Option<Vec<IgnoredAny>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
}

/// What a successful answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Embedded {
    /// `usage.prompt_tokens`, when the server reports it.
    pub prompt_tokens: Option<u64>,
}

/// Reads the answer to a request of `inputs` inputs; `Err` when it is not JSON, or has no
/// `data` list with one entry per input.
pub fn parse(body: &[u8], inputs: usize) -> Result<Embedded, String> {
    let answer: Answer = serde_json::from_slice(body).map_err(|e| {
        let shown = String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned();
        format!("the answer is not an embeddings JSON body ({e}): {shown}")
    })?;
    match answer.data {
        None => Err(
            "the answer has no \"data\" list (is the endpoint an OpenAI \
                     embeddings API?)"
                .into(),
        ),
        Some(data) if data.len() != inputs => Err(format!(
            "the answer's \"data\" has {} entries for {inputs} input(s)",
            data.len()
        )),
        Some(_) => Ok(Embedded {
            prompt_tokens: answer.usage.and_then(|u| u.prompt_tokens),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_and_usage_are_read() {
        let body = br#"{"object": "list", "model": "m",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -1e-3]}],
            "usage": {"prompt_tokens": 7, "total_tokens": 7}}"#;
        assert_eq!(
            parse(body, 1),
            Ok(Embedded {
                prompt_tokens: Some(7)
            })
        );
        let no_usage = br#"{"data": [{"embedding": "AAAA"}]}"#;
        assert_eq!(parse(no_usage, 1).unwrap().prompt_tokens, None);
    }

    #[test]
    fn answers_without_the_embeddings_fail() {
        let no_data = br#"{"object": "list", "usage": {"prompt_tokens": 3}}"#;
        assert!(parse(no_data, 1).unwrap_err().contains("no \"data\" list"));
        let empty = br#"{"data": []}"#;
        assert!(parse(empty, 1)
            .unwrap_err()
            .contains("0 entries for 1 input"));
        let not_json = b"<html>nope</html>";
        assert!(parse(not_json, 1).unwrap_err().contains("<html>nope"));
        let data_not_list = br#"{"data": {"embedding": [1]}}"#;
        assert!(parse(data_not_list, 1).is_err());
    }
}
