//! The HTTP client against canned servers on loopback: timing of a streamed response
//! split across writes, usage, and one-line failures.

use std::time::Duration;

use bytes::Bytes;
use std::io::{Read, Write};
use std::net::TcpListener;

use vrs_bench::args::Backend;
use vrs_bench::client::{parse_uri, HttpClient};

/// Serves every connection (a thread each): reads one request, then writes `pieces`
/// with `gap` before each.
fn canned(head: &'static str, pieces: Vec<&'static [u8]>, gap: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut socket in listener.incoming().flatten() {
            let pieces = pieces.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                let _ = socket.read(&mut buf);
                let _ = socket.write_all(head.as_bytes());
                for piece in pieces {
                    std::thread::sleep(gap);
                    let _ = socket.write_all(piece);
                    let _ = socket.flush();
                }
            });
        }
    });
    format!("http://{addr}/v1/completions")
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

#[tokio::test]
async fn streamed_chunks_are_timed_and_usage_wins() {
    let pieces: Vec<&'static [u8]> = vec![
        b"data: {\"choices\":[{\"text\":\"\"}]}\n\n",
        b"data: {\"choices\":[{\"text\":\"a\"}]}\n",
        b"\ndata: {\"choices\":[{\"te",
        b"xt\":\"b\"}]}\n\ndata: {\"choices\":[{\"text\":\"c\"}]}\n\n",
        b"data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n\
          data: {\"choices\":[],\"usage\":{\"completion_tokens\":5}}\n\ndata: [DONE]\n\n",
    ];
    let url = canned(SSE_HEAD, pieces, Duration::from_millis(30));
    let client = HttpClient::new();
    let record = client
        .send(&parse_uri(&url).unwrap(), Bytes::from_static(b"{}"), 3)
        .await;
    assert!(record.success, "{:?}", record.error);
    assert_eq!(record.prompt_len, 3);
    assert_eq!(
        record.output_tokens, 5,
        "usage.completion_tokens is the count"
    );
    // Pieces go out 30 ms apart. "a" completes with piece 3 (its blank line), "b" and
    // "c" both with piece 4: one 30 ms gap, then a zero gap within the same read.
    assert_eq!(record.itl.len(), 2);
    assert!(record.itl[0] >= 0.025, "{:?}", record.itl);
    assert!(record.itl[1] < 0.01, "{:?}", record.itl);
    assert!(
        record.ttft >= 0.08 && record.ttft < record.latency,
        "{record:?}"
    );
}

#[tokio::test]
async fn chunks_are_counted_without_usage() {
    let pieces: Vec<&'static [u8]> = vec![
        b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
        b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
        b"data: {\"choices\":[{\"delta\":{\"content\":\"y\"}}]}\n\n",
    ];
    let url = canned(SSE_HEAD, pieces, Duration::from_millis(5));
    let record = HttpClient::new()
        .send(&parse_uri(&url).unwrap(), Bytes::new(), 1)
        .await;
    assert!(record.success, "{:?}", record.error);
    assert_eq!(
        record.output_tokens, 2,
        "role-only chunk is not content; EOF ends the stream"
    );
}

#[tokio::test]
async fn failures_are_one_line_records() {
    let not_found = canned(
        "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 38\r\n\r\n\
         {\"error\":{\"message\":\"no such route\"}}",
        vec![],
        Duration::ZERO,
    );
    let client = HttpClient::new();
    let record = client
        .send(&parse_uri(&not_found).unwrap(), Bytes::new(), 1)
        .await;
    let error = record.error.unwrap();
    assert!(!record.success);
    assert!(
        error.contains("404") && error.contains("no such route"),
        "{error}"
    );

    let in_stream = canned(
        SSE_HEAD,
        vec![b"data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"error\":{\"message\":\"engine died\"}}\n\n"],
        Duration::ZERO,
    );
    let record = client
        .send(&parse_uri(&in_stream).unwrap(), Bytes::new(), 1)
        .await;
    assert_eq!(record.error.as_deref(), Some("engine died"));

    let silent = canned(SSE_HEAD, vec![b"data: [DONE]\n\n"], Duration::ZERO);
    let record = client
        .send(&parse_uri(&silent).unwrap(), Bytes::new(), 1)
        .await;
    assert!(record.error.unwrap().contains("no choices"));

    // Done without text (one token that is half a character): a success, timed at the
    // first chunk with a choice, with the usage's token count.
    let empty = canned(
        SSE_HEAD,
        vec![
            b"data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n",
            b"data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n",
        ],
        Duration::from_millis(30),
    );
    let record = client
        .send(&parse_uri(&empty).unwrap(), Bytes::new(), 1)
        .await;
    assert!(record.success, "{:?}", record.error);
    assert_eq!(record.output_tokens, 1);
    assert!(record.itl.is_empty());
    assert!(
        record.ttft >= 0.025,
        "timed at the first chunk, not earlier"
    );
    assert!(record.latency - record.ttft >= 0.02, "nor at the end");

    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{closed}/v1/completions");
    let record = client
        .send(&parse_uri(&url).unwrap(), Bytes::new(), 1)
        .await;
    let error = record.error.unwrap();
    assert!(
        error.to_lowercase().contains("refused") && !error.contains('\n'),
        "{error}"
    );
    let models = client
        .get_json(&format!("http://{closed}/v1/models"))
        .await
        .unwrap_err();
    assert!(models.starts_with("cannot reach"), "{models}");
}

/// The Responses API's stream: the prelude is not TTFT, deltas are timed, the usage of
/// `response.completed` is the count and ends the stream.
#[tokio::test]
async fn responses_events_are_timed_and_completed_ends_the_stream() {
    let pieces: Vec<&'static [u8]> = vec![
        b"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"usage\":null}}\n\n\
          event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{\"usage\":null}}\n\n",
        b"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{}}\n\n\
          event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n",
        b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"b\"}\n\n",
        b"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"ab\"}\n\n\
          event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"output_tokens\":4}}}\n\n",
    ];
    let url = canned(SSE_HEAD, pieces, Duration::from_millis(30));
    let record = HttpClient::for_backend(Backend::OpenaiResponses, None)
        .send(&parse_uri(&url).unwrap(), Bytes::from_static(b"{}"), 2)
        .await;
    assert!(record.success, "{:?}", record.error);
    assert_eq!(record.output_tokens, 4, "response.completed's usage");
    assert!(record.ttft >= 0.055, "not at the prelude: {record:?}");
    assert_eq!(record.itl.len(), 1);
    assert!(record.itl[0] >= 0.025, "{:?}", record.itl);

    let silent = canned(
        SSE_HEAD,
        vec![b"data: {\"type\":\"response.created\",\"response\":{}}\n\n"],
        Duration::ZERO,
    );
    let record = HttpClient::for_backend(Backend::OpenaiResponses, None)
        .send(&parse_uri(&silent).unwrap(), Bytes::new(), 1)
        .await;
    let error = record.error.unwrap();
    assert!(
        error.contains("no output events") && error.contains("Responses"),
        "{error}"
    );
}

/// Anthropic's stream: ping and message_start are not TTFT, message_delta's usage is the
/// count, an error event fails the request with its message.
#[tokio::test]
async fn messages_events_are_timed_and_errors_are_records() {
    let pieces: Vec<&'static [u8]> = vec![
        b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":2,\"output_tokens\":0}}}\n\n\
          event: ping\ndata: {\"type\":\"ping\"}\n\n",
        b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
          event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n",
        b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"b\"}}\n\n",
        b"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
          event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n\
          event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ];
    let url = canned(SSE_HEAD, pieces, Duration::from_millis(30));
    let client = HttpClient::for_backend(Backend::AnthropicMessages, None);
    let record = client
        .send(&parse_uri(&url).unwrap(), Bytes::from_static(b"{}"), 2)
        .await;
    assert!(record.success, "{:?}", record.error);
    assert_eq!(record.output_tokens, 3, "message_delta's usage");
    assert!(record.ttft >= 0.055, "not at message_start: {record:?}");
    assert_eq!(record.itl.len(), 1);

    let failing = canned(
        SSE_HEAD,
        vec![b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"],
        Duration::ZERO,
    );
    let record = client
        .send(&parse_uri(&failing).unwrap(), Bytes::new(), 1)
        .await;
    assert_eq!(record.error.as_deref(), Some("Overloaded"));
}
