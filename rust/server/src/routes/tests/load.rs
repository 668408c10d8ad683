//! `GET /load` through the serving router: vLLM's `server_load`, and each engine's ranks
//! from the READY messages the state keeps, by engine index. The same body as
//! tests/server/test_load.py.

use super::*;
use vrs_wire::{RankMemory, Ready};

fn rank(rank: u32, device: &str, weight_bytes: u64, kv_cache_bytes: u64) -> RankMemory {
    RankMemory {
        rank,
        device: device.into(),
        weight_bytes,
        kv_cache_bytes,
    }
}

async fn load_text(h: &Harness) -> String {
    let (status, _, bytes) = call(h, "GET", "/load", "").await;
    assert_eq!(status, StatusCode::OK);
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn load_reports_each_engines_ranks_by_engine_index() {
    let h = Harness::start(vec![5], Duration::ZERO);
    // The fake engine's own READY reports no ranks.
    assert_eq!(
        load_text(&h).await,
        r#"{"server_load":0,"engines":[{"engine_index":0,"ranks":[]}]}"#
    );

    let fake = h.state.readies[0].clone();
    let engine = |engine_index: u32, ranks: Vec<RankMemory>| Ready {
        engine_index,
        ranks,
        ..fake.clone()
    };
    // Two tensor-parallel ranks on engine 1 (kept before engine 0), none on engine 2.
    let h = h.with_readies(vec![
        engine(
            1,
            vec![
                rank(0, "cuda:2", 8_053_063_680, 1 << 33),
                rank(1, "cuda:3", 8_053_063_681, 1 << 33),
            ],
        ),
        engine(2, vec![]),
        engine(0, vec![rank(0, "cpu", 1, 0)]),
    ]);
    assert_eq!(
        load_text(&h).await,
        concat!(
            r#"{"server_load":0,"engines":["#,
            r#"{"engine_index":0,"ranks":[{"rank":0,"device":"cpu","weight_bytes":1,"kv_cache_bytes":0}]},"#,
            r#"{"engine_index":1,"ranks":["#,
            r#"{"rank":0,"device":"cuda:2","weight_bytes":8053063680,"kv_cache_bytes":8589934592},"#,
            r#"{"rank":1,"device":"cuda:3","weight_bytes":8053063681,"kv_cache_bytes":8589934592}]},"#,
            r#"{"engine_index":2,"ranks":[]}]}"#
        )
    );
}
