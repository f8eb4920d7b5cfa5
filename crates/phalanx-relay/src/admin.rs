//! The admin HTTP API: JSON over HTTP/1.1, the `/v1/` routes behind a bearer token.
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/matches` | create a match ([`CreateRequest`]); `201` and a [`MatchTicket`](crate::MatchTicket) |
//! | `GET /v1/matches` | every match ([`MatchInfo`](crate::MatchInfo)s) |
//! | `GET /v1/matches/{id}` | one match |
//! | `POST /v1/matches/{id}/start` | start it now |
//! | `POST /v1/matches/{id}/end` | end it (`{"code": 0}`) |
//! | `POST /v1/matches/{id}/kick` | remove a player (`{"player": 1, "ban": false}`) |
//! | `GET /v1/metrics` | the relay's [`Metrics`](crate::Metrics) as JSON |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /healthz` | `200` while the process serves |
//! | `GET /readyz` | `200` while it takes new matches, `503` once draining |
//!
//! Every refusal is a status and a JSON body `{"error": "<kind>", "message": "<text>"}`, and
//! changes nothing: `unauthorized` (401), `malformed` (400: not JSON, unknown or missing
//! fields, a bad match id), `unknown_match` (404), `not_seated` (404), `conflict` (409: ended,
//! started, a token in use), `invalid` (422: seats or configuration out of bounds), `full`
//! (429), `draining` (503).

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use phalanx_proto::{PlayerId, Readmit, SessionConfig};
use serde::Deserialize;

use crate::api::{CreateError, MatchError, MatchId, MatchSpec, StartPolicy};
use crate::metrics::Process;
use crate::RelayHandle;

/// What `POST /v1/matches` takes. Only `players` is required.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CreateRequest {
    /// Players' seats.
    pub players: u8,
    /// The session to start from: `"default"` (the default) or `"quiet_relay"`
    /// (`SessionConfig::quiet_relay`, the archers demo's); the fields below change it.
    pub profile: Option<Profile>,
    /// The turn length, milliseconds (the session's `turns.length_ms`). Default 100.
    pub turn_ms: Option<u32>,
    /// The game's data hash every client must match. Default 0.
    pub game_data_hash: Option<u64>,
    /// The session's `link.heartbeat_ms`, which every client must match. Default: the
    /// session's default.
    pub heartbeat_ms: Option<u32>,
    /// Spectator seats. Default 0.
    pub spectators: Option<u8>,
    /// `"when_full"` (the default) or `"manual"`.
    pub start: Option<StartPolicy>,
    /// The players' tokens, one a seat. Default: random.
    pub tokens: Option<Vec<u64>>,
    /// The relay ends the match after this many turns ([`MatchSpec::turns_max`]). Default:
    /// none.
    pub turns: Option<u32>,
}

impl CreateRequest {
    /// The match this asks for.
    pub fn spec(&self) -> MatchSpec {
        let mut session = SessionConfig::default();
        if self.profile == Some(Profile::QuietRelay) {
            session = session.quiet_relay();
        }
        if let Some(turn_ms) = self.turn_ms {
            session.turns.length_ms = turn_ms;
        }
        if let Some(hash) = self.game_data_hash {
            session.game_data_hash = hash;
        }
        if let Some(heartbeat) = self.heartbeat_ms {
            session.link.heartbeat_ms = heartbeat;
        }
        let mut spec = MatchSpec::new(self.players);
        spec.session = session;
        spec.spectators = self.spectators.unwrap_or(0);
        spec.start = self.start.unwrap_or_default();
        spec.tokens = self.tokens.clone();
        spec.turns_max = self.turns;
        spec
    }
}

/// A session profile a match starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// `SessionConfig::default()`.
    Default,
    /// `SessionConfig::default().quiet_relay()`.
    QuietRelay,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EndRequest {
    #[serde(default)]
    code: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KickRequest {
    player: u8,
    #[serde(default)]
    ban: bool,
}

/// A refusal: its status and body.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, kind, message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.kind, "message": self.message });
        (self.status, Json(body)).into_response()
    }
}

impl From<CreateError> for ApiError {
    fn from(error: CreateError) -> ApiError {
        let (status, kind) = match &error {
            CreateError::Draining => (StatusCode::SERVICE_UNAVAILABLE, "draining"),
            CreateError::Full { .. } => (StatusCode::TOO_MANY_REQUESTS, "full"),
            CreateError::Players { .. } | CreateError::Config(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "invalid")
            }
            CreateError::Tokens(_) => (StatusCode::CONFLICT, "conflict"),
        };
        ApiError::new(status, kind, error.to_string())
    }
}

impl From<MatchError> for ApiError {
    fn from(error: MatchError) -> ApiError {
        let (status, kind) = match &error {
            MatchError::UnknownMatch(_) => (StatusCode::NOT_FOUND, "unknown_match"),
            MatchError::NotSeated(_) => (StatusCode::NOT_FOUND, "not_seated"),
            MatchError::Ended | MatchError::Started => (StatusCode::CONFLICT, "conflict"),
            MatchError::Stopped => (StatusCode::SERVICE_UNAVAILABLE, "draining"),
        };
        ApiError::new(status, kind, error.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "malformed", rejection.body_text())
    }
}

struct Admin {
    relay: RelayHandle,
    /// The token's SHA-256: compared digest to digest, so the comparison's time says nothing
    /// about the token.
    token_digest: Vec<u8>,
}

type Shared = State<Arc<Admin>>;

fn digest(bytes: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, bytes).as_ref().to_vec()
}

fn authorize(admin: &Admin, headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match given {
        Some(token) if digest(token.as_bytes()) == admin.token_digest => Ok(()),
        Some(_) => Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "wrong token")),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "an `Authorization: Bearer <token>` header is required",
        )),
    }
}

fn match_id(text: &str) -> Result<MatchId, ApiError> {
    text.parse().map_err(|_| {
        ApiError::new(StatusCode::BAD_REQUEST, "malformed", "a match id is 16 hex digits")
    })
}

/// The admin API over `relay`, its `/v1/` routes behind `token`.
pub fn router(relay: RelayHandle, token: &str) -> Router {
    let admin = Arc::new(Admin { relay, token_digest: digest(token.as_bytes()) });
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .route("/v1/metrics", get(metrics_json))
        .route("/v1/matches", post(create).get(list))
        .route("/v1/matches/{id}", get(inspect))
        .route("/v1/matches/{id}/start", post(start))
        .route("/v1/matches/{id}/end", post(end))
        .route("/v1/matches/{id}/kick", post(kick))
        .with_state(admin)
}

async fn ready(State(admin): Shared) -> Response {
    if admin.relay.is_draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response()
    } else {
        (StatusCode::OK, "ready\n").into_response()
    }
}

async fn metrics(State(admin): Shared) -> Response {
    let text = admin.relay.metrics().await.prometheus(Some(Process::read()));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn metrics_json(State(admin): Shared, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&admin, &headers)?;
    Ok(Json(admin.relay.metrics().await).into_response())
}

async fn create(
    State(admin): Shared,
    headers: HeaderMap,
    body: Result<Json<CreateRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    authorize(&admin, &headers)?;
    let Json(request) = body?;
    let ticket = admin.relay.create_match(request.spec()).await?;
    tracing::info!(id = %ticket.id, players = request.players, "match created");
    Ok((StatusCode::CREATED, Json(ticket)).into_response())
}

async fn list(State(admin): Shared, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&admin, &headers)?;
    Ok(Json(admin.relay.list().await).into_response())
}

async fn inspect(
    State(admin): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    authorize(&admin, &headers)?;
    Ok(Json(admin.relay.inspect(match_id(&id)?).await?).into_response())
}

async fn start(
    State(admin): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    authorize(&admin, &headers)?;
    admin.relay.start_match(match_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn end(
    State(admin): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<EndRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    authorize(&admin, &headers)?;
    let id = match_id(&id)?;
    let Json(request) = body?;
    admin.relay.end_match(id, request.code).await?;
    tracing::info!(%id, code = request.code, "match ended by the operator");
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn kick(
    State(admin): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<KickRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    authorize(&admin, &headers)?;
    let id = match_id(&id)?;
    let Json(request) = body?;
    let readmit = if request.ban { Readmit::Never } else { Readmit::Allow };
    admin.relay.kick(id, PlayerId(request.player), readmit).await?;
    tracing::info!(%id, player = request.player, ban = request.ban, "player removed by the operator");
    Ok(StatusCode::NO_CONTENT.into_response())
}
