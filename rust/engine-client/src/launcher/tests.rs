use super::*;
use crate::fake::{run_fake_engine, FakeEngine, MAX_MODEL_LEN};
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

fn start(version: u32, failed: Option<&str>) -> Sockets {
    let sockets = bind_sockets().unwrap();
    let address = sockets.handshake_address.clone();
    let failed = failed.map(str::to_owned);
    std::thread::spawn(move || {
        run_fake_engine(
            address,
            vec![3],
            Duration::ZERO,
            FakeEngine::default(),
            version,
            failed,
        )
    });
    sockets
}

fn config() -> rmpv::Value {
    json_to_msgpack(&serde_json::json!({"model": "/m", "mock": true}))
}

fn no_exit() -> (
    watch::Sender<Option<ExitStatus>>,
    watch::Receiver<Option<ExitStatus>>,
) {
    watch::channel(None)
}

#[test]
fn handshake_connects_and_learns_the_engine() {
    let (_tx, rx) = no_exit();
    let cancel = AtomicBool::new(false);
    let (connected, dir) = handshake(
        start(1, None),
        rx,
        config(),
        Duration::from_secs(10),
        &cancel,
    )
    .unwrap();
    assert_eq!(connected.identity, vec![0, 0]);
    assert_eq!(connected.ready.max_model_len, MAX_MODEL_LEN);
    assert!(
        dir.path().join("input").exists(),
        "ipc sockets live in the private dir"
    );
}

#[test]
fn failed_carries_the_engine_message() {
    let (_tx, rx) = no_exit();
    let cancel = AtomicBool::new(false);
    let err = handshake(
        start(1, Some("no weights here")),
        rx,
        config(),
        Duration::from_secs(10),
        &cancel,
    )
    .err()
    .unwrap();
    assert_eq!(
        err.to_string(),
        "the engine failed to start: no weights here"
    );
}

#[test]
fn protocol_version_mismatch_is_refused() {
    let (_tx, rx) = no_exit();
    let cancel = AtomicBool::new(false);
    let err = handshake(
        start(9, None),
        rx,
        config(),
        Duration::from_secs(10),
        &cancel,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("protocol version 9"), "{err}");
}

#[test]
fn each_stage_times_out_with_a_clear_error() {
    let (_tx, rx) = no_exit();
    let cancel = AtomicBool::new(false);
    let started = Instant::now();
    let err = handshake(
        bind_sockets().unwrap(),
        rx,
        config(),
        Duration::from_millis(300),
        &cancel,
    )
    .err()
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        matches!(err, EngineError::Timeout { stage: "HELLO", .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("VRS_ENGINE_READY_TIMEOUT_S"),
        "{err}"
    );
}

#[test]
fn engine_exit_is_noticed_before_the_timeout() {
    let (tx, rx) = no_exit();
    tx.send(Some(ExitStatus::from_raw(3 << 8))).unwrap();
    let cancel = AtomicBool::new(false);
    let started = Instant::now();
    let err = handshake(
        bind_sockets().unwrap(),
        rx,
        config(),
        Duration::from_secs(60),
        &cancel,
    )
    .err()
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    match err {
        EngineError::Exited { stage, status } => {
            assert_eq!(stage, "HELLO");
            assert_eq!(status.code(), Some(3));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn cancel_stops_waiting() {
    let (_tx, rx) = no_exit();
    let cancel = AtomicBool::new(true);
    let err = handshake(
        bind_sockets().unwrap(),
        rx,
        config(),
        Duration::from_secs(60),
        &cancel,
    )
    .err()
    .unwrap();
    assert!(matches!(err, EngineError::Cancelled));
}

#[tokio::test]
async fn engine_runs_in_its_own_group_and_stops() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fake_python = dir.path().join("python");
    // The group's second member proves the whole group is signalled.
    std::fs::write(&fake_python, "#!/bin/sh\nsleep 30 &\nwait\n").unwrap();
    std::fs::set_permissions(&fake_python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let child = spawn_engine(fake_python.to_str().unwrap(), "ipc:///nowhere", 0, "info").unwrap();
    let pid = child.id() as i32;
    // SAFETY: plain syscall.
    assert_eq!(
        unsafe { libc::getpgid(pid) },
        pid,
        "the engine leads its own process group"
    );
    let process = EngineProcess::supervise(child).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let status = process.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    let gone = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        live_group_members(pid) == 0
    });
    assert!(gone, "no process of the group is left");
}

/// Processes of group `pgid` that are not zombies (from /proc).
fn live_group_members(pgid: i32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .filter(|stat| {
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or("", |(_, rest)| rest)
                .split_whitespace()
                .collect();
            fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
        })
        .count()
}

#[test]
fn spawn_failure_names_the_interpreter() {
    let err = spawn_engine("/nonexistent/python9", "ipc:///x", 0, "info")
        .err()
        .unwrap();
    assert!(err.to_string().contains("/nonexistent/python9"), "{err}");
}

#[test]
fn json_becomes_msgpack() {
    let v = json_to_msgpack(&serde_json::json!({
        "model": "/m", "mock": true, "max_model_len": 64, "neg": -1, "big": u64::MAX,
        "ratio": 0.5, "none": null, "list": [1, "a"]
    }));
    let map: Vec<(String, rmpv::Value)> = v
        .as_map()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().to_owned(), v.clone()))
        .collect();
    let get = |k: &str| map.iter().find(|(n, _)| n == k).unwrap().1.clone();
    assert_eq!(get("model"), rmpv::Value::from("/m"));
    assert_eq!(get("mock"), rmpv::Value::Boolean(true));
    assert_eq!(get("max_model_len"), rmpv::Value::from(64));
    assert_eq!(get("neg"), rmpv::Value::from(-1));
    assert_eq!(get("big"), rmpv::Value::from(u64::MAX));
    assert_eq!(get("ratio"), rmpv::Value::F64(0.5));
    assert_eq!(get("none"), rmpv::Value::Nil);
    assert_eq!(
        get("list"),
        rmpv::Value::Array(vec![rmpv::Value::from(1), rmpv::Value::from("a")])
    );
}
