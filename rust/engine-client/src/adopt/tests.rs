use super::*;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::net::{UnixListener, UnixStream};

fn ready(index: u16) -> Ready {
    Ready {
        engine_index: u32::from(index),
        max_model_len: 64,
        vocab_size: 11,
        block_size: 16,
        num_kv_blocks: 0,
        eos_token_ids: vec![1],
        model_name: "tiny".into(),
        is_mock: true,
        runner: "generate".into(),
        pooling_tasks: vec![],
        classify_labels: vec![],
        ranks: vec![],
    }
}

/// A bound, listening unix socket handed over as a bare fd (as `pass_fds` does).
fn unix_listener(dir: &Path, name: &str) -> (RawFd, String) {
    let path = dir.join(name);
    let listener = UnixListener::bind(&path).unwrap();
    (listener.into_raw_fd(), format!("ipc://{}", path.display()))
}

fn send_ready(dealer: &zmq::Socket, index: u16) {
    let body = vrs_wire::encode(&ready(index)).unwrap();
    dealer
        .send_multipart([vec![HandshakeKind::Ready.as_byte()], body], 0)
        .unwrap();
}

fn engine_dealer(ctx: &zmq::Context, index: u16, address: &str) -> zmq::Socket {
    let dealer = ctx.socket(zmq::DEALER).unwrap();
    dealer
        .set_identity(&vrs_wire::engine_identity(index))
        .unwrap();
    dealer.connect(address).unwrap();
    dealer
}

#[test]
fn adopted_router_and_pull_serve_engines_that_connected_before() {
    let dir = tempfile::tempdir().unwrap();
    let (input_fd, input) = unix_listener(dir.path(), "input");
    let (output_fd, output) = unix_listener(dir.path(), "output");
    // The engine connects and sends before anyone accepts: the kernel's backlog holds
    // the connections, the DEALER/PUSH queues hold the messages.
    let engine = zmq::Context::new();
    let dealer = engine_dealer(&engine, 0, &input);
    send_ready(&dealer, 0);
    let push = engine.socket(zmq::PUSH).unwrap();
    push.connect(&output).unwrap();
    push.send("outputs", 0).unwrap();

    let ctx = zmq::Context::new();
    let router = zmq_listener(&ctx, zmq::ROUTER, input_fd, "--input-listener-fd", &input).unwrap();
    let pull = zmq_listener(&ctx, zmq::PULL, output_fd, "--output-listener-fd", &output).unwrap();
    let cancel = AtomicBool::new(false);
    let readies = wait_ready(&router, 0, 1, Duration::from_secs(10), &cancel).unwrap();
    assert_eq!(readies, vec![(vec![0, 0], ready(0))]);

    router
        .send_multipart([vec![0, 0], b"add".to_vec()], 0)
        .unwrap();
    assert!(dealer.poll(zmq::POLLIN, 5000).unwrap() > 0);
    assert_eq!(dealer.recv_multipart(0).unwrap(), [b"add".to_vec()]);
    assert!(pull.poll(zmq::POLLIN, 5000).unwrap() > 0);
    assert_eq!(pull.recv_bytes(0).unwrap(), b"outputs");
    // An engine that connects after the adoption is served too.
    let late = engine_dealer(&engine, 1, &input);
    late.send("late", 0).unwrap();
    assert!(router.poll(zmq::POLLIN, 5000).unwrap() > 0);
    assert_eq!(
        router.recv_multipart(0).unwrap(),
        [vec![1, 0], b"late".to_vec()]
    );
    // ROUTER_MANDATORY: a message for an unknown engine is an error, not a silent drop.
    assert!(router
        .send_multipart([vec![9, 9], b"x".to_vec()], 0)
        .is_err());
    // libzmq leaves the socket files alone (the parent removes them).
    assert!(dir.path().join("input").exists() && dir.path().join("output").exists());
}

#[test]
fn wait_ready_checks_identities_and_gives_up_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = zmq::Context::new();
    let cancel = AtomicBool::new(false);

    let (fd, address) = unix_listener(dir.path(), "a");
    let router = zmq_listener(&ctx, zmq::ROUTER, fd, "--input-listener-fd", &address).unwrap();
    let engines: Vec<zmq::Socket> = [3, 2]
        .iter()
        .map(|&index| {
            let d = engine_dealer(&ctx, index, &address);
            send_ready(&d, index);
            d
        })
        .collect();
    let readies = wait_ready(&router, 2, 2, Duration::from_secs(10), &cancel).unwrap();
    let indices: Vec<u32> = readies.iter().map(|(_, r)| r.engine_index).collect();
    assert_eq!(indices, [2, 3], "ordered by engine index");
    drop(engines);

    let (fd, address) = unix_listener(dir.path(), "b");
    let router = zmq_listener(&ctx, zmq::ROUTER, fd, "--input-listener-fd", &address).unwrap();
    let stranger = engine_dealer(&ctx, 7, &address);
    send_ready(&stranger, 7);
    let err = wait_ready(&router, 0, 1, Duration::from_secs(10), &cancel).unwrap_err();
    assert!(
        err.to_string().contains("unexpected engine identity"),
        "{err}"
    );

    let started = Instant::now();
    let err = wait_ready(&router, 0, 1, Duration::from_millis(300), &cancel).unwrap_err();
    assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
    assert!(
        err.to_string().contains("READY on the input socket"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    cancel.store(true, Ordering::SeqCst);
    let err = wait_ready(&router, 0, 1, Duration::from_secs(10), &cancel).unwrap_err();
    assert!(matches!(err, EngineError::Cancelled), "{err}");
}

#[test]
fn wrong_fds_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = check_listener(1_000_000, "--listen-fd", Family::Inet).unwrap_err();
    assert!(
        err.contains("--listen-fd 1000000: not an open file descriptor"),
        "{err}"
    );
    let file = std::fs::File::create(dir.path().join("f")).unwrap();
    let err = check_listener(file.as_raw_fd(), "--listen-fd", Family::Inet).unwrap_err();
    assert!(err.ends_with("not a socket"), "{err}");

    let listener = UnixListener::bind(dir.path().join("s")).unwrap();
    let err = check_listener(listener.as_raw_fd(), "--listen-fd", Family::Inet).unwrap_err();
    assert!(err.contains("expected a TCP (IPv4/IPv6) socket"), "{err}");
    let stream = UnixStream::connect(dir.path().join("s")).unwrap();
    let err = check_listener(stream.as_raw_fd(), "--input-listener-fd", Family::Unix).unwrap_err();
    assert!(err.contains("not listening"), "{err}");
    check_engine_listener(
        listener.as_raw_fd(),
        "--input-listener-fd",
        &format!("ipc://{}", dir.path().join("s").display()),
    )
    .unwrap();
    let err = check_engine_listener(
        listener.as_raw_fd(),
        "--input-listener-fd",
        "ipc:///elsewhere",
    )
    .unwrap_err();
    assert!(
        err.contains("is bound to") && err.contains("not to ipc:///elsewhere"),
        "{err}"
    );
    let err = check_engine_listener(listener.as_raw_fd(), "--input-listener-fd", "inproc://x")
        .unwrap_err();
    assert!(err.contains("ipc://PATH or tcp://HOST:PORT"), "{err}");

    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let err = check_listener(tcp.as_raw_fd(), "--input-listener-fd", Family::Unix).unwrap_err();
    assert!(err.contains("expected a unix domain socket"), "{err}");
    check_engine_listener(tcp.as_raw_fd(), "--input-listener-fd", "tcp://127.0.0.1:1").unwrap();
}

#[tokio::test]
async fn adopted_http_listener_accepts_connections_made_before() {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let early = std::net::TcpStream::connect(addr).unwrap();
    let HttpListener::Tcp(listener) =
        http_listener(std_listener.into_raw_fd(), "--listen-fd").unwrap()
    else {
        panic!("a TCP socket must be adopted as TCP");
    };
    let (_, peer) = listener.accept().await.unwrap();
    assert_eq!(peer, early.local_addr().unwrap());
}

#[tokio::test]
async fn an_adopted_unix_http_listener_is_unix_and_accepts_connections_made_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("http.sock");
    let std_listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut early = UnixStream::connect(&path).unwrap();
    let HttpListener::Unix(listener) =
        http_listener(std_listener.into_raw_fd(), "--listen-fd").unwrap()
    else {
        panic!("an AF_UNIX socket must be adopted as a unix listener");
    };
    let (accepted, _) = listener.accept().await.unwrap();
    std::io::Write::write_all(&mut early, b"x").unwrap();
    let mut accepted = accepted.into_std().unwrap();
    accepted.set_nonblocking(false).unwrap();
    let mut byte = [0u8; 1];
    std::io::Read::read_exact(&mut accepted, &mut byte).unwrap();
    assert_eq!(&byte, b"x");
}

#[test]
fn an_inherited_udp_socket_is_refused_as_the_http_listener() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let err = http_listener(udp.into_raw_fd(), "--listen-fd").unwrap_err();
    assert!(err.contains("--listen-fd"), "{err}");
    assert!(err.contains("stream socket"), "{err}");
}

#[test]
fn a_dead_engine_is_reported_but_an_abandoned_connection_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let (fd, address) = unix_listener(dir.path(), "input");
    // A connection given up before adoption (no ZMTP handshake ever): not an engine death.
    drop(UnixStream::connect(dir.path().join("input")).unwrap());
    let ctx = zmq::Context::new();
    let (router, mut lost) =
        watched_zmq_listener(&ctx, zmq::ROUTER, fd, "--input-listener-fd", &address).unwrap();

    let engine = zmq::Context::new();
    let dealer = engine_dealer(&engine, 0, &address);
    send_ready(&dealer, 0);
    let cancel = AtomicBool::new(false);
    wait_ready(&router, 0, 1, Duration::from_secs(10), &cancel).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        lost.try_recv().is_err(),
        "the abandoned connection counted as a death"
    );

    drop(dealer);
    drop(engine);
    let deadline = Instant::now() + Duration::from_secs(5);
    let reason = loop {
        match lost.try_recv() {
            Ok(reason) => break reason,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("no report of the closed engine connection: {e}"),
        }
    };
    assert!(
        reason.contains("connection to the engine closed"),
        "{reason}"
    );
}
