//! The [`EngineClient`](crate::EngineClient) on [`VllmWire`] against fake vLLM engines
//! over real ZMQ: both handshakes, outputs with aux frames, aborts, engine death, timeouts.

use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use vrs_wire::SamplingParams;

use super::super::*;
use super::plain_request as request;
use crate::adopt::{engine_listeners, InheritedListener};
use crate::fake::vllm::{self as fake, message as m, FakeVllm, Join, VllmReceived};
use crate::{EngineClient, EngineError, EngineEvent, RequestHandle};

/// Every output of a request up to its finish (or death: the last element is `Err`).
async fn collect(handle: &mut RequestHandle) -> Vec<Result<vrs_wire::EngineCoreOutput, String>> {
    let mut all = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), handle.recv())
            .await
            .expect("an output within 5 s")
            .expect("the channel stays open until the finish");
        match event {
            EngineEvent::Output(o) => {
                let done = o.finish_reason.is_some();
                all.push(Ok(o));
                if done {
                    return all;
                }
            }
            EngineEvent::Dead(reason) => {
                all.push(Err(reason.to_string()));
                return all;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_serve_tokens_logprobs_and_timings_through_aux_frames() {
    let c = tokio::task::block_in_place(|| fake::connect(2, vec![3, 4, 5], Duration::ZERO, true));
    assert_eq!(c.group_ready.len(), 2);
    assert_eq!(
        c.group_ready[1].data_parallel_rank, 1,
        "ready responses by engine index"
    );
    let mut p = SamplingParams::new(3);
    p.logprobs = Some(2);
    p.prompt_logprobs = Some(1);
    let mut handles: Vec<RequestHandle> = (0..4)
        .map(|i| {
            let mut r = request(&format!("r{i}"), 3);
            r.sampling_params = p.clone();
            c.client.submit(r).unwrap()
        })
        .collect();
    let mut engines_used = std::collections::HashSet::new();
    for h in &mut handles {
        engines_used.insert(h.engine_index());
        let outs: Vec<_> = collect(h).await.into_iter().map(Result::unwrap).collect();
        let tokens: Vec<u32> = outs.iter().flat_map(|o| o.new_token_ids.clone()).collect();
        assert_eq!(tokens, vec![3, 4, 5]);
        assert_eq!(outs[2].finish_reason.as_deref(), Some("length"));
        for (o, &t) in outs.iter().zip(&tokens) {
            let row = &o.new_logprobs.as_ref().unwrap()[0];
            let (ids, lps) = m::logprob_row(t, 2);
            assert_eq!(row.token_id, t);
            assert_eq!(row.rank, 1);
            let top: Vec<i64> = row.top_token_ids.iter().map(|&x| i64::from(x)).collect();
            assert_eq!(top, ids[1..].to_vec());
            assert_eq!(row.logprob, f64::from(lps[0]));
        }
        let first = &outs[0];
        let prompt = first.prompt_logprobs.as_ref().unwrap();
        assert_eq!(
            prompt.iter().map(|r| r.token_id).collect::<Vec<_>>(),
            vec![4, 5]
        );
        assert_eq!(first.num_cached_tokens, m::CACHED_TOKENS);
        assert_eq!(first.queue_time, Some(m::QUEUE_TIME));
        assert_eq!(first.prefill_time, Some(m::PREFILL_TIME));
        assert!(outs[1].prompt_logprobs.is_none() && outs[1].queue_time.is_none());
        let decode = outs[2].decode_time.unwrap();
        assert!(
            decode >= 2.0 * m::STEP_TIME,
            "three steps from the first token: {decode}"
        );
        assert!(
            outs[0].decode_time.is_none(),
            "only the final output has one"
        );
        h.finished();
    }
    assert_eq!(engines_used.len(), 2, "requests spread over both engines");
    let stats = c.client.engine_stats();
    assert_eq!(stats.len(), 2);
    for (_, s) in stats {
        assert_eq!(s.kv_cache_usage, m::KV_USAGE);
        assert_eq!(s.num_total_blocks, m::NUM_GPU_BLOCKS as u64);
        assert!(
            s.prefix_cache_queries >= 3 * m::PREFIX_DELTA.0 as u64,
            "summed deltas"
        );
    }
    assert_eq!(c.client.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eos_stops_unseen_and_the_engine_got_vllms_params() {
    let c = tokio::task::block_in_place(|| fake::connect(1, vec![3, 1, 4], Duration::ZERO, false));
    let mut h = c.client.submit(request("e", 10)).unwrap();
    let outs: Vec<_> = collect(&mut h)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let last = outs.last().unwrap();
    assert_eq!(
        (last.finish_reason.as_deref(), last.stop_token_id),
        (Some("stop"), Some(1))
    );
    h.finished();
    let log = c.engines[0].received.lock().unwrap().clone();
    let VllmReceived::Add {
        request_id,
        prompt,
        params,
    } = &log[0]
    else {
        panic!("an ADD first: {log:?}");
    };
    assert_eq!((request_id.as_str(), prompt.clone()), ("e", vec![3, 4, 5]));
    assert_eq!(m::int(params, "_eos_token_id"), Some(1));
    assert_eq!(m::int(params, "max_tokens"), Some(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_request_is_refused_before_the_wire() {
    let c = tokio::task::block_in_place(|| fake::connect(1, vec![3], Duration::ZERO, false));
    let mut r = request("pool", 1);
    r.pooling_params = Some(vrs_wire::PoolingParams::new(vrs_wire::PoolingTask::Embed));
    let Err(EngineError::Unsupported(message)) = c.client.submit(r) else {
        panic!("a pooling request cannot go to a vLLM engine");
    };
    assert!(message.contains("pooling_params"), "{message}");
    assert_eq!(c.client.in_flight(), 0, "nothing left in flight");
    let mut h = c.client.submit(request("next", 1)).unwrap();
    assert_eq!(collect(&mut h).await.len(), 1, "the client still serves");
    h.finished();
    assert_eq!(
        c.engines[0].received.lock().unwrap().len(),
        1,
        "only the second was sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_request_is_aborted_in_its_engine() {
    let c =
        tokio::task::block_in_place(|| fake::connect(1, vec![3], Duration::from_millis(20), false));
    let mut h = c.client.submit(request("gone", 1000)).unwrap();
    assert!(matches!(h.recv().await, Some(EngineEvent::Output(_))));
    drop(h);
    let engine = c.engines[0].clone();
    let aborted = tokio::task::block_in_place(|| {
        engine.wait_for(|e| e.aborted() == vec!["gone".to_string()])
    });
    assert!(
        aborted,
        "ABORT of the dropped request: {:?}",
        engine.aborted()
    );
    assert_eq!(c.client.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dead_sentinel_fails_every_open_request() {
    let c =
        tokio::task::block_in_place(|| fake::connect(1, vec![3], Duration::from_millis(10), false));
    let mut a = c.client.submit(request("a", 1000)).unwrap();
    let mut b = c.client.submit(request("b", 1000)).unwrap();
    assert!(matches!(a.recv().await, Some(EngineEvent::Output(_))));
    c.engines[0].kill.store(true, Ordering::SeqCst);
    for h in [&mut a, &mut b] {
        let last = collect(h).await.pop().unwrap();
        assert!(
            last.unwrap_err().contains("fatal error"),
            "dead, with the reason"
        );
    }
    assert!(matches!(
        c.client.submit(request("c", 1)),
        Err(EngineError::Dead(_))
    ));
    let reason = tokio::time::timeout(Duration::from_secs(5), c.client.died()).await;
    assert!(reason.is_ok());
}

#[test]
fn a_handshake_timeout_names_the_missing_engines() {
    let sockets = bind_sockets("tcp://127.0.0.1:0").unwrap();
    let address = sockets.handshake_address.clone();
    assert!(!address.ends_with(":0"), "the bound port: {address}");
    let f = FakeVllm::default();
    std::thread::spawn(move || fake::run(Join::Handshake(address), 0, vec![3], Duration::ZERO, f));
    let cancel = AtomicBool::new(false);
    let Err(err) = handshake(sockets, 3, Duration::from_millis(800), &cancel) else {
        panic!("two of three engines never came");
    };
    let message = err.to_string();
    assert!(message.contains("engine(s) 1, 2 of 3"), "{message}");
    assert!(message.contains("HELLO"), "{message}");
}

#[test]
fn a_cancelled_handshake_stops_waiting() {
    let sockets = bind_sockets("tcp://127.0.0.1:0").unwrap();
    let cancel = AtomicBool::new(true);
    let result = handshake(sockets, 1, Duration::from_secs(30), &cancel);
    assert!(matches!(result, Err(EngineError::Cancelled)));
}

#[test]
fn a_wildcard_handshake_host_is_refused() {
    let Err(e) = bind_sockets("tcp://0.0.0.0:0") else {
        panic!("engines cannot connect to a wildcard");
    };
    assert!(e.to_string().contains("not a wildcard"), "{e}");
}

/// Two unix listeners bound as vLLM's supervisor binds them, as adopted listeners.
fn supervisor_listeners(dir: &std::path::Path) -> crate::adopt::EngineListeners {
    let bind = |name: &str| {
        let listener = std::os::unix::net::UnixListener::bind(dir.join(name)).unwrap();
        listener.into_raw_fd()
    };
    let (input_fd, output_fd) = (bind("in.sock"), bind("out.sock"));
    let input_address = listener_address(input_fd, "--input-listener-fd").unwrap();
    let output_address = listener_address(output_fd, "--output-listener-fd").unwrap();
    assert_eq!(
        input_address,
        format!("ipc://{}", dir.join("in.sock").display())
    );
    engine_listeners(
        InheritedListener {
            fd: input_fd,
            flag: "--input-listener-fd",
            address: &input_address,
        },
        InheritedListener {
            fd: output_fd,
            flag: "--output-listener-fd",
            address: &output_address,
        },
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervisor_owned_listeners_serve_engines_from_the_start_index() {
    let dir = tempfile::tempdir().unwrap();
    let listeners = supervisor_listeners(dir.path());
    let join = Join::Direct {
        input: format!("ipc://{}", dir.path().join("in.sock").display()),
        output: format!("ipc://{}", dir.path().join("out.sock").display()),
    };
    let f = FakeVllm::default();
    let engine = f.clone();
    std::thread::spawn(move || fake::run(join, 2, vec![6, 7], Duration::ZERO, f));
    let cancel = AtomicBool::new(false);
    let engines = tokio::task::block_in_place(|| {
        wait_ready(&listeners.input, 2, 1, Duration::from_secs(10), &cancel)
    })
    .unwrap();
    assert_eq!(engines[0].0, vec![2, 0], "engine 2's identity");
    let (identities, _): (Vec<_>, Vec<_>) = engines.into_iter().unzip();
    let wire = Arc::new(VllmWire::new(vec![1], 400));
    let client = EngineClient::start(listeners.input, listeners.output, identities, wire).unwrap();
    let mut h = client.submit(request("s", 2)).unwrap();
    let outs: Vec<_> = collect(&mut h)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        outs.iter()
            .flat_map(|o| o.new_token_ids.clone())
            .collect::<Vec<_>>(),
        vec![6, 7]
    );
    assert_eq!(h.engine_index(), 2);
    h.finished();
    assert!(engine.aborted().is_empty());
}

#[test]
fn a_supervised_wait_names_the_engines_without_a_ready_response() {
    let dir = tempfile::tempdir().unwrap();
    let listeners = supervisor_listeners(dir.path());
    let join = Join::Direct {
        input: format!("ipc://{}", dir.path().join("in.sock").display()),
        output: format!("ipc://{}", dir.path().join("out.sock").display()),
    };
    std::thread::spawn(move || fake::run(join, 4, vec![1], Duration::ZERO, FakeVllm::default()));
    let cancel = AtomicBool::new(false);
    let Err(err) = wait_ready(&listeners.input, 4, 3, Duration::from_millis(800), &cancel) else {
        panic!("engines 5 and 6 never came");
    };
    let message = err.to_string();
    assert!(message.contains("engine(s) 5, 6 of 3"), "{message}");
    assert!(message.contains("ready response"), "{message}");
}
