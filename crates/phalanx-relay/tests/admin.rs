//! The admin API refuses bad input with a typed status and body, and changes nothing: unknown
//! matches, malformed JSON, a missing or wrong token, limits exceeded.

mod common;

use common::{request, serve, TOKEN};
use phalanx_relay::load::admin_request;
use phalanx_relay::Limits;
use serde_json::Value;

/// What the relay holds, to check that a refused request changed nothing.
fn state(admin: std::net::SocketAddr) -> (Value, u64, u64) {
    let (status, list) = request(admin, "GET", "/v1/matches", "");
    assert_eq!(status, 200);
    let (status, metrics) = request(admin, "GET", "/v1/metrics", "");
    assert_eq!(status, 200);
    let ids = Value::Array(list.as_array().unwrap().iter().map(|m| m["id"].clone()).collect());
    (ids, metrics["matches_created"].as_u64().unwrap(), metrics["matches"].as_u64().unwrap())
}

fn refused(
    admin: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    status: u16,
    kind: &str,
) {
    let before = state(admin);
    let (got, body_json) = request(admin, method, path, body);
    assert_eq!(
        (got, body_json["error"].as_str()),
        (status, Some(kind)),
        "{method} {path} {body}: {body_json}"
    );
    assert!(body_json["message"].as_str().is_some_and(|m| !m.is_empty()), "{body_json}");
    assert_eq!(state(admin), before, "{method} {path} {body} changed the relay");
}

#[test]
fn a_bad_token_or_body_gets_a_typed_error_and_changes_nothing() {
    let served = serve(Limits::default());
    let admin = served.admin;
    let (status, ticket) = request(admin, "POST", "/v1/matches", r#"{"players": 2}"#);
    assert_eq!(status, 201, "{ticket}");

    // The token.
    for token in ["", "wrong"] {
        let before = state(admin);
        let (status, body) = admin_request(admin, token, "GET", "/v1/matches", "").unwrap();
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("\"unauthorized\""), "{body}");
        let (status, _) =
            admin_request(admin, token, "POST", "/v1/matches", r#"{"players": 2}"#).unwrap();
        assert_eq!(status, 401);
        assert_eq!(state(admin), before);
    }
    assert_ne!(TOKEN, "wrong");

    // The body.
    refused(admin, "POST", "/v1/matches", r#"{"players": "#, 400, "malformed");
    refused(admin, "POST", "/v1/matches", "not json", 400, "malformed");
    refused(admin, "POST", "/v1/matches", r#"{"players": 2, "colour": "red"}"#, 400, "malformed");
    refused(admin, "POST", "/v1/matches", r#"{}"#, 400, "malformed");
    refused(admin, "POST", "/v1/matches", r#"{"players": -1}"#, 400, "malformed");
    refused(admin, "POST", "/v1/matches", r#"{"players": 2, "profile": "fast"}"#, 400, "malformed");
    refused(admin, "POST", "/v1/matches", r#"{"players": 0}"#, 422, "invalid");
    refused(admin, "POST", "/v1/matches", r#"{"players": 200}"#, 422, "invalid");
    refused(admin, "POST", "/v1/matches", r#"{"players": 2, "turn_ms": 0}"#, 422, "invalid");
    refused(admin, "POST", "/v1/matches", r#"{"players": 2, "tokens": [5, 5]}"#, 409, "conflict");
    refused(admin, "POST", "/v1/matches", r#"{"players": 2, "tokens": [5]}"#, 409, "conflict");
    let used = ticket["seats"][0]["token"].as_u64().unwrap();
    refused(
        admin,
        "POST",
        "/v1/matches",
        &format!(r#"{{"players": 2, "tokens": [{used}, 9]}}"#),
        409,
        "conflict",
    );
}

#[test]
fn unknown_matches_and_players_and_limits_get_a_typed_error_and_change_nothing() {
    let mut limits = Limits::default();
    limits.matches_max = 2;
    let served = serve(limits);
    let admin = served.admin;
    let (status, ticket) = request(admin, "POST", "/v1/matches", r#"{"players": 2}"#);
    assert_eq!(status, 201, "{ticket}");
    let id = ticket["id"].as_str().unwrap().to_owned();

    // Unknown matches and players.
    for path in ["/v1/matches/0000000000000001", "/v1/matches/0000000000000001/end"] {
        let method = if path.ends_with("end") { "POST" } else { "GET" };
        refused(admin, method, path, "{}", 404, "unknown_match");
    }
    refused(
        admin,
        "POST",
        "/v1/matches/0000000000000001/kick",
        r#"{"player": 0}"#,
        404,
        "unknown_match",
    );
    refused(admin, "GET", "/v1/matches/xyz", "", 400, "malformed");
    refused(
        admin,
        "POST",
        &format!("/v1/matches/{id}/kick"),
        r#"{"player": 1}"#,
        404,
        "not_seated",
    );
    refused(
        admin,
        "POST",
        &format!("/v1/matches/{id}/kick"),
        r#"{"player": 1, "why": 2}"#,
        400,
        "malformed",
    );
    refused(admin, "POST", &format!("/v1/matches/{id}/end"), r#"{"code": "x"}"#, 400, "malformed");

    // The relay's limit on matches.
    let (status, _) = request(admin, "POST", "/v1/matches", r#"{"players": 2}"#);
    assert_eq!(status, 201);
    refused(admin, "POST", "/v1/matches", r#"{"players": 2}"#, 429, "full");

    // What is refused leaves a good request working.
    let (status, info) = request(admin, "GET", &format!("/v1/matches/{id}"), "");
    assert_eq!((status, info["state"].as_str()), (200, Some("lobby")));
    let (status, _) = request(admin, "POST", &format!("/v1/matches/{id}/start"), "");
    assert_eq!(status, 204);
    refused(admin, "POST", &format!("/v1/matches/{id}/start"), "", 409, "conflict");
    let (status, _) = request(admin, "POST", &format!("/v1/matches/{id}/end"), r#"{"code": 3}"#);
    assert_eq!(status, 204);
}
