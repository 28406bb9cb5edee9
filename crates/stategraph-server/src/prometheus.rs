//! Prometheus metrics: the [`metrics`] facade's figures (the engine's, the server's) rendered
//! in Prometheus's text format at `GET /metrics`, with the queue's and the workers' gauges
//! read at each scrape. Names follow LangGraph's server (`lg_api_…`) where it has the same
//! figure; the rest are `stategraph_…`.
//!
//! The recorder is the process's global one, installed by the first server built; a process
//! that installed its own recorder before keeps it (its figures go there), and `/metrics`
//! then answers 503 saying so.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::app::Shared;
use crate::error::ApiError;

/// The bucket bounds (seconds) of every histogram: from a millisecond to a minute.
const BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The bucket bounds (milliseconds) of `lg_api_http_requests_latency`, LangGraph's.
const HTTP_BUCKETS_MS: [f64; 13] = [
    10.0,
    100.0,
    500.0,
    1_000.0,
    5_000.0,
    15_000.0,
    30_000.0,
    60_000.0,
    120_000.0,
    300_000.0,
    600_000.0,
    1_800_000.0,
    3_600_000.0,
];

/// How often recorded histogram samples are folded into their buckets between scrapes.
const UPKEEP: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the process's global one (once); its handle, or
/// `None` when another recorder was installed first.
pub(crate) fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(&BUCKETS)
                .ok()?
                .set_buckets_for_metric(
                    Matcher::Full("lg_api_http_requests_latency".into()),
                    &HTTP_BUCKETS_MS,
                )
                .ok()?;
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            Some(handle)
        })
        .as_ref()
}

/// Folds recorded samples into their buckets now and then, so that a server nobody scrapes
/// does not keep every sample (started with the workers).
pub(crate) fn spawn_upkeep() {
    if let Some(handle) = install() {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(UPKEEP).await;
                handle.run_upkeep();
            }
        });
    }
}

/// The metrics' `# HELP` texts.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "lg_api_http_requests_total",
        "Total number of HTTP requests."
    );
    describe_histogram!(
        "lg_api_http_requests_latency",
        metrics::Unit::Milliseconds,
        "HTTP request latency in milliseconds."
    );
    describe_gauge!(
        "lg_api_num_pending_runs",
        "The number of runs currently pending"
    );
    describe_gauge!(
        "lg_api_num_running_runs",
        "The number of runs currently running"
    );
    describe_gauge!(
        "lg_api_pending_runs_wait_time_max",
        metrics::Unit::Seconds,
        "The maximum time a run has been pending, in seconds"
    );
    describe_gauge!("lg_api_workers_max", "The maximum number of workers");
    describe_gauge!("lg_api_workers_active", "The number of active workers");
    describe_gauge!(
        "lg_api_workers_available",
        "The number of available workers"
    );
    describe_gauge!(
        "lg_api_pg_pool_max",
        "The maximum size of a Postgres connection pool, by pool (saver, store, runs)"
    );
    describe_gauge!(
        "lg_api_pg_pool_size",
        "The connections a Postgres pool holds open, at its last checkout"
    );
    describe_gauge!(
        "lg_api_pg_pool_available",
        "The idle connections of a Postgres pool, at its last checkout"
    );
    describe_counter!(
        "stategraph_server_runs_total",
        "Runs of the server that ended, by status (success, error, interrupted)."
    );
    describe_histogram!(
        "stategraph_server_run_duration_seconds",
        metrics::Unit::Seconds,
        "How long the server's runs executed."
    );
    describe_gauge!(
        "stategraph_server_streams_active",
        "Answers following a run open now (run streams, joins, runs/wait)."
    );
    describe_counter!(
        "stategraph_server_runs_purged_total",
        "Ended runs whose events were purged from the run queue past the retention (stateless runs go with them)."
    );
    describe_counter!(
        "stategraph_server_errors_total",
        "Errors answered, by kind (client: 4xx, server: 5xx, run: a run that failed)."
    );
    describe_counter!(
        "stategraph_graph_runs_total",
        "Graph runs that ended, by status (success, interrupted, error)."
    );
    describe_histogram!(
        "stategraph_graph_run_duration_seconds",
        metrics::Unit::Seconds,
        "How long graph runs took."
    );
    describe_histogram!(
        "stategraph_graph_step_duration_seconds",
        metrics::Unit::Seconds,
        "How long super-steps took (their tasks, and the checkpoint save they waited for)."
    );
    describe_histogram!(
        "stategraph_checkpoint_call_duration_seconds",
        metrics::Unit::Seconds,
        "How long checkpointer calls took, by backend and operation."
    );
}

/// Query of `GET /metrics`.
#[derive(serde::Deserialize, Default, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub(crate) struct MetricsQuery {
    format: Option<String>,
}

/// `GET /metrics`: every figure in Prometheus's text format, or with `format=json` LangGraph's
/// JSON summary (`queue`, `workers`, `api.http_requests_total`); an unknown format is
/// Prometheus's, as LangGraph's server reads it.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "get_metrics",
    tag = "System",
    params(MetricsQuery),
    responses((status = 200, description = "The server's metrics (Prometheus text format, or JSON with `format=json`)."))
)]
pub(crate) async fn scrape(
    axum::extract::State(state): Shared,
    crate::http::extract::Query(query): crate::http::extract::Query<MetricsQuery>,
) -> Result<Response, ApiError> {
    let Some(handle) = install() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics are not available: another metrics recorder was installed in this \
             process before the server's",
        ));
    };
    let stats = state
        .runs
        .queue
        .stats()
        .await
        .map_err(crate::run::api_error)?;
    metrics::gauge!("lg_api_num_pending_runs").set(stats.pending as f64);
    metrics::gauge!("lg_api_num_running_runs").set(stats.running as f64);
    let waited = stats
        .oldest_pending
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .map_or(0.0, |d| d.as_secs_f64());
    metrics::gauge!("lg_api_pending_runs_wait_time_max").set(waited);
    let (max, active) = state.runs.workers_in_use();
    metrics::gauge!("lg_api_workers_max").set(max as f64);
    metrics::gauge!("lg_api_workers_active").set(active as f64);
    metrics::gauge!("lg_api_workers_available").set(max.saturating_sub(active) as f64);
    let text = handle.render();
    if query.format.as_deref() == Some("json") {
        let json = serde_json::json!({
            "queue": {
                "n_pending": stats.pending,
                "n_running": stats.running,
                "pending_runs_wait_time_max_secs": waited,
            },
            "workers": {
                "max": max,
                "active": active,
                "available": max.saturating_sub(active),
            },
            "api": { "http_requests_total": request_counts(&text) },
        });
        return Ok(axum::Json(json).into_response());
    }
    let mut response = text.into_response();
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(response)
}

/// The `lg_api_http_requests_total` samples of exposition `text`, as
/// `{method, path, status, count}` objects.
fn request_counts(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("lg_api_http_requests_total{")?;
            let (labels, value) = rest.rsplit_once("} ")?;
            let mut sample = serde_json::Map::new();
            for pair in labels.split("\",") {
                let (key, value) = pair.split_once("=\"")?;
                let value = value.trim_end_matches('"');
                sample.insert(key.trim_start_matches(',').to_owned(), value.into());
            }
            let count: f64 = value.trim().parse().ok()?;
            sample.insert("count".into(), serde_json::json!(count as u64));
            Some(serde_json::Value::Object(sample))
        })
        .collect()
}

/// An open run stream, counted in `stategraph_server_streams_active` while it lives.
pub(crate) struct OpenStream(());

impl OpenStream {
    pub(crate) fn new() -> Self {
        metrics::gauge!("stategraph_server_streams_active").increment(1.0);
        Self(())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        metrics::gauge!("stategraph_server_streams_active").decrement(1.0);
    }
}
