//! vLLM's data-parallel coordinator followed over real ZMQ (a fake coordinator's XPUB:
//! the wave reaches the encoded ADD and the engines, the counts steer the choice), and
//! an engine whose connection closes without a word (the input ROUTER's monitor).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rmpv::Value;

use super::super::coordinator::{decode_update, Update};
use super::super::*;
use super::plain_request as request;
use crate::fake::vllm as fake;
use crate::wire::Wire;
use crate::{EngineEvent, RequestHandle};

fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, value).unwrap();
    out
}

/// A publish as `DPCoordinatorProc` writes it: `[counts | nil, wave, running]`, counts
/// per engine `[waiting, running, kv_cache_usage]`.
fn publish(counts: Option<&[(u64, u64)]>, wave: i64, running: bool) -> Vec<u8> {
    let counts = counts.map_or(Value::Nil, |c| {
        Value::Array(
            c.iter()
                .map(|&(w, r)| Value::Array(vec![w.into(), r.into(), Value::F64(0.5)]))
                .collect(),
        )
    });
    encode(&Value::Array(vec![counts, wave.into(), running.into()]))
}

/// A fake coordinator's publish socket, and a [`Coordinator`] for engines
/// `first..first + count` subscribed to it (the subscription has arrived).
fn subscribed(first: u16, count: u16) -> (zmq::Socket, Coordinator) {
    let xpub = zmq::Context::new().socket(zmq::XPUB).unwrap();
    xpub.bind("tcp://127.0.0.1:*").unwrap();
    let address = xpub.get_last_endpoint().unwrap().unwrap();
    let coordinator = Coordinator::connect(&address, first, count).unwrap();
    assert!(xpub.poll(zmq::POLLIN, 5000).unwrap() > 0, "no subscription");
    assert_eq!(xpub.recv_bytes(0).unwrap(), b"\x01");
    (xpub, coordinator)
}

/// Waits up to 5 s for `pred`.
fn eventually(mut pred: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if pred() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// The `current_wave` (item 12) of an encoded ADD's message frame.
fn wave_of(frames: &[Vec<u8>]) -> i64 {
    let body = rmpv::decode::read_value(&mut &frames[1][..]).unwrap();
    body.as_array().unwrap()[12].as_i64().unwrap()
}

#[test]
fn publishes_decode_with_and_without_counts() {
    let update = decode_update(&publish(Some(&[(2, 3), (0, 1)]), 4, true)).unwrap();
    assert_eq!(
        update,
        Update {
            counts: Some(vec![(2, 3), (0, 1)]),
            wave: 4,
            engines_running: true,
        }
    );
    let update = decode_update(&publish(None, 5, false)).unwrap();
    assert_eq!((update.counts, update.wave), (None, 5));
    let two = encode(&Value::Array(vec![Value::Nil, 1.into()]));
    assert!(decode_update(&two).unwrap_err().contains("3 items"));
    let bad = encode(&Value::Array(vec![Value::Nil, "w".into(), true.into()]));
    assert!(decode_update(&bad).unwrap_err().contains("wave"));
}

#[test]
fn the_latest_wave_reaches_the_encoded_add() {
    let (xpub, coordinator) = subscribed(0, 2);
    let wire = VllmWire::new(vec![1], 100).with_coordinator(coordinator);
    assert_eq!(wave_of(&wire.encode_add(&request("a", 4)).unwrap()), 0);
    xpub.send(publish(None, 6, false), 0).unwrap();
    xpub.send(publish(None, 7, true), 0).unwrap();
    assert!(
        eventually(|| wave_of(&wire.encode_add(&request("b", 4)).unwrap()) == 7),
        "the ADD never carried wave 7"
    );
}

#[test]
fn counts_are_sliced_to_the_served_engines() {
    let (xpub, coordinator) = subscribed(1, 2);
    xpub.send(publish(Some(&[(9, 9), (1, 2), (3, 4)]), 0, true), 0)
        .unwrap();
    assert!(eventually(|| coordinator.load(2).is_some()));
    // (running, waiting) by the deployment's engine index; engine 0 is not served here.
    assert_eq!(coordinator.load(1), Some((2, 1)));
    assert_eq!(coordinator.load(2), Some((4, 3)));
    assert_eq!((coordinator.load(0), coordinator.load(3)), (None, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wave_reaches_the_engines_and_counts_steer_the_choice() {
    let (xpub, coordinator) = subscribed(0, 2);
    xpub.send(publish(Some(&[(9, 9), (0, 0)]), 3, true), 0)
        .unwrap();
    assert!(eventually(
        || coordinator.wave() == 3 && coordinator.load(1).is_some()
    ));
    assert!(coordinator.engines_running());
    let c = tokio::task::block_in_place(|| {
        fake::connect_with(2, vec![3], Duration::from_millis(5), false, |wire| {
            wire.with_coordinator(coordinator)
        })
    });
    let mut handles: Vec<RequestHandle> = (0..3)
        .map(|i| c.client.submit(request(&format!("r{i}"), 4)).unwrap())
        .collect();
    for h in &mut handles {
        while let Some(EngineEvent::Output(o)) = h.recv().await {
            if o.finish_reason.is_some() {
                break;
            }
        }
    }
    // Engine 0 reports 18 queued: all three go to engine 1, stamped with wave 3.
    assert_eq!(*c.engines[1].waves.lock().unwrap(), [3, 3, 3]);
    assert!(c.engines[0].waves.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_vanishes_ends_its_open_request() {
    let c =
        tokio::task::block_in_place(|| fake::connect(1, vec![3], Duration::from_millis(10), false));
    let client = std::sync::Arc::clone(&c.client);
    let mut lost = c.lost;
    tokio::spawn(async move {
        if let Some(reason) = lost.recv().await {
            client.mark_dead(reason);
        }
    });
    let mut open = c.client.submit(request("a", 100_000)).unwrap();
    assert!(matches!(open.recv().await, Some(EngineEvent::Output(_))));
    c.engines[0].vanish.store(true, Ordering::SeqCst);
    let last = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match open.recv().await {
                Some(EngineEvent::Output(_)) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the open request ended within 10 s, not a hang");
    match last {
        Some(EngineEvent::Dead(reason)) => {
            assert!(
                reason.contains("connection to the engine closed"),
                "{reason}"
            );
        }
        other => panic!("expected Dead, got {other:?}"),
    }
    assert!(c.client.dead_reason().is_some());
}
