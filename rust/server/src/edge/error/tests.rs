use super::*;
use serde_json::Value;

fn json(e: &ApiError) -> Value {
    serde_json::from_slice(&e.to_json()).unwrap()
}

#[test]
fn each_variant_maps_to_status_type_and_param() {
    let cases = [
        (
            ApiError::bad("temperature", "bad temp"),
            400,
            "BadRequestError",
            Some("temperature"),
        ),
        (
            ApiError::bad_request("bad json"),
            400,
            "BadRequestError",
            None,
        ),
        (
            ApiError::ModelNotFound("x".into()),
            404,
            "NotFoundError",
            Some("model"),
        ),
        (
            ApiError::RouteNotFound("/nope".into()),
            404,
            "NotFoundError",
            None,
        ),
        (
            ApiError::MethodNotAllowed {
                method: "GET".into(),
                path: "/v1/completions".into(),
            },
            405,
            "MethodNotAllowedError",
            None,
        ),
        (
            ApiError::PayloadTooLarge {
                limit: 10,
                flag: None,
            },
            413,
            "PayloadTooLargeError",
            None,
        ),
        (
            ApiError::EngineDead("gone".into()),
            503,
            "ServiceUnavailableError",
            None,
        ),
        (ApiError::Unauthorized, 401, "AuthenticationError", None),
        (
            ApiError::TooManyRequests(4),
            429,
            "TooManyRequestsError",
            None,
        ),
        (ApiError::Timeout("2".into()), 504, "TimeoutError", None),
        (
            ApiError::Unavailable("shed".into()),
            503,
            "ServiceUnavailableError",
            None,
        ),
        (
            ApiError::EngineError("boom".into()),
            500,
            "InternalServerError",
            None,
        ),
        (
            ApiError::Internal("bug".into()),
            500,
            "InternalServerError",
            None,
        ),
    ];
    for (err, status, kind, param) in cases {
        assert_eq!(err.status().as_u16(), status, "{err:?}");
        let body = json(&err);
        assert_eq!(body["error"]["type"], kind);
        assert_eq!(body["error"]["code"], status);
        assert_eq!(body["error"]["message"], err.to_string());
        match param {
            Some(p) => assert_eq!(body["error"]["param"], p),
            None => assert!(body["error"]["param"].is_null()),
        }
    }
}

#[test]
fn messages_name_the_problem() {
    assert_eq!(
        ApiError::ModelNotFound("gpt".into()).to_string(),
        "The model `gpt` does not exist."
    );
    assert_eq!(
        ApiError::bad("n", "`n` > 1 is not supported").to_string(),
        "`n` > 1 is not supported"
    );
}

#[test]
fn too_large_names_the_limit_in_mib_and_the_flag() {
    let serving = ApiError::PayloadTooLarge {
        limit: 32 * 1024 * 1024,
        flag: Some("--max-request-body"),
    };
    assert_eq!(
        serving.to_string(),
        "request body is larger than the limit of 32 MiB (32 MiB = 33554432 bytes); \
         raise --max-request-body"
    );
    let render = ApiError::PayloadTooLarge {
        limit: 65536,
        flag: None,
    };
    assert_eq!(
        render.to_string(),
        "request body is larger than the limit of 0.0625 MiB (0.0625 MiB = 65536 bytes)"
    );
    assert_eq!(mib(1), "0.00000095367431640625");
    assert_eq!(mib(1000), "0.00095367431640625");
    assert_eq!(mib(3 * 1024 * 1024 + 512 * 1024), "3.5");
    assert_eq!(mib(0), "0");
}

#[tokio::test]
async fn into_response_sets_status_and_json() {
    use http_body_util::BodyExt;
    let response = ApiError::bad("top_p", "top_p must be in (0, 1]").into_response();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(response.headers()["content-type"], "application/json");
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["error"]["param"], "top_p");
}

#[test]
fn a_setting_the_engine_wire_cannot_carry_is_the_clients_400() {
    let err = ApiError::from(EngineError::Unsupported(
        "pooling_params: not on vLLM's wire".into(),
    ));
    assert_eq!(err.status().as_u16(), 400);
    assert_eq!(
        json(&err)["error"]["message"],
        "pooling_params: not on vLLM's wire"
    );
    let dead = ApiError::from(EngineError::Dead("gone".into()));
    assert_eq!(
        dead.status().as_u16(),
        503,
        "other engine errors keep their status"
    );
}
