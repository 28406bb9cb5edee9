//! Logs and traces for a process that serves (feature `telemetry`; OTLP export with feature
//! `otel`): [`init`] installs the process's `tracing` subscriber.
//!
//! - Logs go to standard error, human-readable ([`LogFormat::Text`], colored on a terminal)
//!   or one JSON object per line ([`LogFormat::Json`]), filtered by `RUST_LOG` (`tracing`'s
//!   directives, e.g. `info,stategraph_graph=debug`) or else the level given (default
//!   `info`). A run that fails is logged once, with its thread and run ids; every request is
//!   one line (method, route, status, latency).
//! - With feature `otel` and `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the spans of the server and the engine (a
//!   run's tree: run → graph → steps → tasks → model and tool calls, checkpoint calls) are
//!   exported over OTLP (HTTP/protobuf) to that endpoint, named by `OTEL_SERVICE_NAME`
//!   (default `stategraph`) with `OTEL_RESOURCE_ATTRIBUTES`, as the OpenTelemetry SDKs read
//!   them. [`Telemetry::shutdown`] sends what is still buffered.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use stategraph_server::telemetry::{LogFormat, TelemetryOptions};
//!
//! let telemetry = stategraph_server::telemetry::init(
//!     TelemetryOptions::new().format(LogFormat::Json).level("info"),
//! )?;
//! // … serve …
//! telemetry.shutdown();
//! # Ok(()) }
//! ```

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogFormat {
    /// For people: one line per event, colored on a terminal.
    #[default]
    Text,
    /// For collectors: one JSON object per line, with the fields of the spans it is in.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!(
                "unknown log format `{other}`: expected `text` or `json`"
            )),
        }
    }
}

/// What [`init`] sets up.
#[derive(Clone, Debug, Default)]
pub struct TelemetryOptions {
    format: LogFormat,
    level: Option<String>,
    service_name: Option<String>,
    endpoint: Option<String>,
    attributes: Vec<(String, String)>,
}

impl TelemetryOptions {
    /// Text logs at level `info` (unless `RUST_LOG` says otherwise).
    pub fn new() -> Self {
        Self::default()
    }

    /// How log lines are written.
    pub fn format(mut self, format: LogFormat) -> Self {
        self.format = format;
        self
    }

    /// The log filter when `RUST_LOG` is not set: a level (`error`, `warn`, `info`, `debug`,
    /// `trace`) or `tracing` directives.
    pub fn level(mut self, level: impl Into<String>) -> Self {
        self.level = Some(level.into());
        self
    }

    /// The service name exported traces carry when `OTEL_SERVICE_NAME` is not set (default
    /// `stategraph`).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// Exports traces to this OTLP (HTTP) base URL (its `/v1/traces`), whatever the
    /// environment says (feature `otel`).
    pub fn otlp_endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// A resource attribute of the exported traces, besides `OTEL_RESOURCE_ATTRIBUTES`' (e.g.
    /// `openinference.project.name`, the Phoenix project they land in).
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.push((key.into(), value.into()));
        self
    }
}

/// Why [`init`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The log filter (`RUST_LOG` or the level given) does not parse.
    #[error("invalid log filter `{filter}`: {message}")]
    Filter {
        /// The filter.
        filter: String,
        /// What is wrong with it.
        message: String,
    },
    /// The OTLP exporter could not be built from the `OTEL_*` variables.
    #[error("cannot export traces to {endpoint}: {message}")]
    Exporter {
        /// The endpoint configured.
        endpoint: String,
        /// Why.
        message: String,
    },
    /// A `tracing` subscriber was installed already.
    #[error("a tracing subscriber is installed already: {0}")]
    AlreadySet(String),
}

/// The installed telemetry: keep it while the process serves, then
/// [`shutdown`](Self::shutdown) it to send the spans still buffered.
#[must_use = "dropping it does not flush the traces still buffered: call `shutdown`"]
#[derive(Debug)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
    endpoint: Option<String>,
}

impl Telemetry {
    /// Where traces are exported, if they are.
    pub fn otlp_endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// Sends the spans still buffered and stops exporting (nothing without export).
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider {
            if let Err(e) = provider.force_flush() {
                tracing::warn!(error = %e, "the last traces could not be exported");
            }
            let _ = provider.shutdown();
        }
    }
}

/// The OTLP endpoint the environment configures for traces, if any.
pub fn otlp_endpoint_from_env() -> Option<String> {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
}

/// Installs the process's `tracing` subscriber: logs as `options` say and, with feature
/// `otel` and an OTLP endpoint in the environment, trace export.
///
/// # Errors
/// A filter that does not parse, an exporter that cannot be built, or a subscriber installed
/// already.
pub fn init(options: TelemetryOptions) -> Result<Telemetry, TelemetryError> {
    let filter = match std::env::var("RUST_LOG")
        .ok()
        .filter(|f| !f.trim().is_empty())
    {
        Some(f) => f,
        None => options.level.clone().unwrap_or_else(|| "info".to_owned()),
    };
    let env_filter = EnvFilter::try_new(&filter).map_err(|e| TelemetryError::Filter {
        filter: filter.clone(),
        message: e.to_string(),
    })?;
    let logs = match options.format {
        LogFormat::Text => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .boxed()
        }
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    }
    .with_filter(env_filter);
    let endpoint = options.endpoint.clone().or_else(otlp_endpoint_from_env);
    #[cfg(feature = "otel")]
    {
        let (traces, provider) = match &endpoint {
            Some(endpoint) => {
                let (layer, provider) = otel::layer(endpoint, &options)?;
                (Some(layer), Some(provider))
            }
            None => (None, None),
        };
        tracing_subscriber::registry()
            .with(logs)
            .with(traces)
            .try_init()
            .map_err(|e| TelemetryError::AlreadySet(e.to_string()))?;
        Ok(Telemetry { provider, endpoint })
    }
    #[cfg(not(feature = "otel"))]
    {
        tracing_subscriber::registry()
            .with(logs)
            .try_init()
            .map_err(|e| TelemetryError::AlreadySet(e.to_string()))?;
        if let Some(endpoint) = &endpoint {
            tracing::warn!(
                endpoint = endpoint.as_str(),
                "OTEL_EXPORTER_OTLP_ENDPOINT is set, but this build has no OTLP export \
                 (feature `otel`): traces are not exported"
            );
        }
        Ok(Telemetry { endpoint: None })
    }
}

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::Targets;

    use super::{TelemetryError, TelemetryOptions};

    /// The exporter's blocking HTTP client, with its own TLS (rustls on `ring`, webpki's
    /// roots) and the OTLP timeout (`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else
    /// `OTEL_EXPORTER_OTLP_TIMEOUT`, in milliseconds; 10 s without), built on a thread of its
    /// own as a blocking client must be outside the async runtime.
    fn http_client() -> Result<reqwest_otel::blocking::Client, String> {
        let timeout = [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse::<u64>().ok())
        .map_or(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_millis,
        );
        std::thread::spawn(move || {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS set-up: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
            reqwest_otel::blocking::Client::builder()
                .timeout(timeout)
                .tls_backend_preconfigured(tls)
                .build()
                .map_err(|e| format!("HTTP client set-up: {e}"))
        })
        .join()
        .map_err(|_| "the thread building the HTTP client panicked".to_owned())?
    }

    /// The layer that exports the spans of stategraph's crates (at level `info` and above)
    /// to `endpoint`, and its provider.
    pub(super) fn layer<S>(
        endpoint: &str,
        options: &TelemetryOptions,
    ) -> Result<(Box<dyn Layer<S> + Send + Sync>, SdkTracerProvider), TelemetryError>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
    {
        let failed = |message: String| TelemetryError::Exporter {
            endpoint: endpoint.to_owned(),
            message,
        };
        // The endpoint, its `/v1/traces` path and the timeout come from the `OTEL_*`
        // variables, as every OpenTelemetry SDK reads them.
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http_client().map_err(failed)?)
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
        if let Some(base) = &options.endpoint {
            exporter = exporter.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
        }
        let exporter = exporter.build().map_err(|e| failed(e.to_string()))?;
        let mut resource = Resource::builder();
        if std::env::var("OTEL_SERVICE_NAME").is_err() {
            resource = resource.with_service_name(
                options
                    .service_name
                    .clone()
                    .unwrap_or_else(|| "stategraph".to_owned()),
            );
        }
        resource = resource.with_attributes(
            options
                .attributes
                .iter()
                .map(|(k, v)| opentelemetry::KeyValue::new(k.clone(), v.clone())),
        );
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("stategraph");
        // Only stategraph's own spans: the exporter's HTTP client is not traced into itself.
        let only_ours = Targets::new().with_target("stategraph", tracing::Level::INFO);
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(only_ours)
            .boxed();
        Ok((layer, provider))
    }
}
