use super::*;
use crate::fake;
use std::time::Duration;
use vrs_wire::SamplingParams;

fn request(id: &str, max_tokens: u32) -> EngineCoreRequest {
    EngineCoreRequest {
        request_id: id.into(),
        prompt_token_ids: vec![3, 4],
        sampling_params: SamplingParams::new(max_tokens),
        arrival_time: 0.0,
        priority: 0,
        cache_salt: None,
        pooling_params: None,
    }
}

async fn collect(handle: &mut RequestHandle) -> (Vec<u32>, String) {
    let mut ids = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), handle.rx.recv())
            .await
            .unwrap()
            .unwrap()
        {
            EngineEvent::Output(o) => {
                ids.extend(o.new_token_ids);
                if let Some(reason) = o.finish_reason {
                    return (ids, reason);
                }
            }
            EngineEvent::Dead(reason) => return (ids, format!("dead: {reason}")),
        }
    }
}

#[tokio::test]
async fn outputs_reach_their_request_and_the_finish_clears_it() {
    let h = fake::connect(vec![3, 4, 5], Duration::ZERO);
    let mut a = h.client.submit(request("a", 3)).unwrap();
    let mut b = h.client.submit(request("b", 5)).unwrap();
    assert_eq!(collect(&mut a).await, (vec![3, 4, 5], "length".to_string()));
    assert_eq!(
        collect(&mut b).await,
        (vec![3, 4, 5, 3, 4], "length".to_string())
    );
    a.finished();
    b.finished();
    drop((a, b));
    assert_eq!(h.client.in_flight(), 0);
    assert!(
        h.engine.aborted().is_empty(),
        "finished requests are not aborted"
    );
    assert_eq!(h.engine.added().len(), 2);
}

#[tokio::test]
async fn dropping_handles_aborts_them() {
    let h = fake::connect(vec![3], Duration::from_millis(20));
    let handles: Vec<_> = (0..3)
        .map(|i| h.client.submit(request(&format!("r{i}"), 1000)).unwrap())
        .collect();
    assert!(h.engine.wait_for(|e| e.added().len() == 3));
    drop(handles);
    assert_eq!(h.client.in_flight(), 0);
    assert!(h.engine.wait_for(|e| {
        let mut ids = e.aborted();
        ids.sort();
        ids == ["r0", "r1", "r2"]
    }));
}

#[tokio::test]
async fn explicit_abort_is_sent_once() {
    let h = fake::connect(vec![3], Duration::from_millis(10));
    let mut a = h.client.submit(request("x", 1000)).unwrap();
    a.abort();
    drop(a);
    assert!(h.engine.wait_for(|e| e.aborted() == ["x"]));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(h.engine.aborted(), ["x"]);
}

#[tokio::test]
async fn engine_death_fails_open_and_new_requests() {
    let h = fake::connect(vec![3], Duration::from_millis(10));
    let mut a = h.client.submit(request("a", 1000)).unwrap();
    assert!(h.client.dead_reason().is_none());
    h.engine.kill.store(true, Ordering::SeqCst);
    let (_, end) = collect(&mut a).await;
    assert!(
        end.starts_with("dead: the engine reported a fatal error"),
        "{end}"
    );
    let reason = tokio::time::timeout(Duration::from_secs(5), h.client.died())
        .await
        .unwrap();
    assert!(reason.contains("fatal error"));
    let err = h.client.submit(request("b", 1)).err().unwrap();
    assert!(matches!(err, EngineError::Dead(_)), "{err}");
    assert_eq!(h.client.in_flight(), 0);
}

#[tokio::test]
async fn mark_dead_from_outside_reaches_everyone() {
    let h = fake::connect(vec![3], Duration::from_millis(10));
    let mut a = h.client.submit(request("a", 1000)).unwrap();
    h.client
        .mark_dead("the engine process exited unexpectedly (signal: 9)");
    let (_, end) = collect(&mut a).await;
    assert_eq!(
        end,
        "dead: the engine process exited unexpectedly (signal: 9)"
    );
    assert!(h.client.dead_reason().unwrap().contains("signal: 9"));
}

#[tokio::test]
async fn an_add_waits_for_the_input_thread_when_it_holds_the_socket_and_its_abort_follows() {
    let h = fake::connect(vec![3], Duration::from_millis(10));
    // Sent from this thread: the socket is free.
    let mut direct = h.client.submit(request("direct", 1000)).unwrap();
    assert!(h.engine.wait_for(|e| e.added().len() == 1));
    // While the socket is held, an ADD and its ABORT queue for the input thread.
    let held = h.client.input.lock().unwrap();
    let mut queued = h.client.submit(request("queued", 1000)).unwrap();
    queued.abort();
    direct.abort();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(h.engine.added().len(), 1, "nothing passes a held socket");
    drop(held);
    assert!(h.engine.wait_for(|e| e.aborted().len() == 2));
    let log = h.engine.received.lock().unwrap().clone();
    let position = |wanted: &fake::Received| log.iter().position(|r| r == wanted);
    let added = position(&fake::Received::Add(request("queued", 1000))).unwrap();
    let aborted = log
        .iter()
        .position(
            |r| matches!(r, fake::Received::Abort(ids) if ids.contains(&"queued".to_string())),
        )
        .unwrap();
    assert!(added < aborted, "the ABORT came before its ADD: {log:?}");
    drop((direct, queued));
}
