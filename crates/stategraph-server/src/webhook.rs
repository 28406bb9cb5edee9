//! Webhooks: when a run created with `webhook` ends, a POST of the run (its final status,
//! start and end times, the thread's values, its error if any) to that URL, as LangGraph's
//! server sends it.
//!
//! A URL is checked when the run (or cron) is created, and again when it is called, against
//! the server's [`WebhookPolicy`]: by default only public addresses are called (loopback,
//! private, link-local, shared and unique-local ranges are refused, whatever the host name
//! resolves to at either time), so that a caller cannot make the server reach its own
//! network. A delivery never holds up the run or its result: it is sent in the background,
//! retried with backoff on a connection error, a timeout, 429 or 5xx, and logged.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde_json::Value as Json;

use crate::error::ApiError;

/// How long checking a webhook's host name may wait for its resolution.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Which webhook URLs the server accepts and calls, and how it calls them
/// ([`ServerBuilder::webhooks`](crate::ServerBuilder::webhooks)).
///
/// ```
/// use std::time::Duration;
/// use stategraph_server::WebhookPolicy;
///
/// // A local deployment whose receivers run on the same machine or network.
/// let local = WebhookPolicy::new().allow_private_networks(true);
/// // A hosted one: HTTPS to the company's domains only, four tries of ten seconds at most.
/// let hosted = WebhookPolicy::new()
///     .require_https(true)
///     .allowed_domains(["hooks.example.com", "*.example.org"])
///     .max_attempts(4)
///     .timeout(Duration::from_secs(10));
/// # let _ = (local, hosted);
/// ```
#[derive(Clone, Debug)]
pub struct WebhookPolicy {
    enabled: bool,
    allow_private: bool,
    require_https: bool,
    allowed_domains: Vec<String>,
    max_url_length: usize,
    max_attempts: u32,
    timeout: Duration,
    first_backoff: Duration,
}

impl Default for WebhookPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl WebhookPolicy {
    /// Webhooks on: `http` and `https` URLs of any host that resolves to public addresses
    /// only, URLs up to 4,096 bytes (the reference's limit), 3 tries of 30 seconds each,
    /// 500 ms before the first retry (doubling after each).
    pub fn new() -> Self {
        Self {
            enabled: true,
            allow_private: false,
            require_https: false,
            allowed_domains: Vec::new(),
            max_url_length: 4096,
            max_attempts: 3,
            timeout: Duration::from_secs(30),
            first_backoff: Duration::from_millis(500),
        }
    }

    /// Whether webhooks are called at all (default on). Off, runs and crons still accept a
    /// `webhook` (checked as usual) and no call is made, as the reference's
    /// `disable_webhooks`.
    pub fn enabled(mut self, on: bool) -> Self {
        self.enabled = on;
        self
    }

    /// Whether hosts on loopback, private (RFC 1918, unique-local), link-local (cloud
    /// metadata services among them) and shared (CGNAT) addresses may be called; default
    /// no. Turn it on for local development, or when the receivers are on the server's own
    /// network.
    pub fn allow_private_networks(mut self, allow: bool) -> Self {
        self.allow_private = allow;
        self
    }

    /// Whether only `https` URLs are accepted (default no).
    pub fn require_https(mut self, require: bool) -> Self {
        self.require_https = require;
        self
    }

    /// Accepts only these hosts: exact names, or `*.domain` for any subdomain of `domain`
    /// (default: any host).
    pub fn allowed_domains<I, S>(mut self, domains: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed_domains = domains
            .into_iter()
            .map(|d| d.into().trim().to_ascii_lowercase())
            .collect();
        self
    }

    /// How many times a delivery is tried before it is given up (at least 1; default 3).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// How long one try may take, connecting included (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long the first retry waits (default 500 ms); each later one waits twice as long
    /// as the one before.
    pub fn backoff(mut self, first: Duration) -> Self {
        self.first_backoff = first;
        self
    }

    /// Whether `ip` may be called; why not, if it may not.
    fn refuses(&self, ip: IpAddr) -> Option<&'static str> {
        if self.allow_private {
            return None;
        }
        non_public(ip)
    }

    /// The first of `ips` that may not be called, and why.
    fn first_refused(
        &self,
        ips: impl IntoIterator<Item = IpAddr>,
    ) -> Option<(IpAddr, &'static str)> {
        ips.into_iter()
            .find_map(|ip| self.refuses(ip).map(|why| (ip, why)))
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.allowed_domains.is_empty()
            || self
                .allowed_domains
                .iter()
                .any(|d| match d.strip_prefix("*.") {
                    Some(base) => host
                        .strip_suffix(base)
                        .is_some_and(|sub| sub.ends_with('.')),
                    None => host == d,
                })
    }

    /// Checks a webhook URL as the run that gives it is created: 422 naming what is wrong.
    pub(crate) async fn check(&self, url: &str) -> Result<Url, ApiError> {
        if url.len() > self.max_url_length {
            return Err(ApiError::invalid("Webhook URL too long"));
        }
        if url.starts_with('/') {
            return Err(ApiError::invalid(
                "Relative webhook URLs are not supported: give an absolute http or https URL",
            ));
        }
        let parsed =
            Url::parse(url).map_err(|e| ApiError::invalid(format!("Invalid webhook URL: {e}")))?;
        match parsed.scheme() {
            "https" => {}
            "http" if !self.require_https => {}
            "http" => return Err(ApiError::invalid("Webhook must use https")),
            other => {
                return Err(ApiError::invalid(format!(
                    "Webhook host blocked: scheme '{other}' not allowed"
                )));
            }
        }
        let host = parsed
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| ApiError::invalid("Invalid webhook hostname ''"))?
            .to_ascii_lowercase();
        if !self.host_allowed(host.trim_start_matches('[').trim_end_matches(']')) {
            return Err(ApiError::invalid("Webhook domain not allowed"));
        }
        let port = parsed.port_or_known_default().unwrap_or(80);
        if let Some((ip, why)) = self.first_refused(resolve(&parsed, port).await?) {
            return Err(ApiError::invalid(format!(
                "Webhook host blocked: {host} is a {why} address ({ip}); the server calls \
                 public addresses only unless its webhook policy allows private networks"
            )));
        }
        Ok(parsed)
    }
}

/// The IP a URL's host is, when it is one (not a name).
fn literal_ip(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    }
}

/// The addresses a URL's host stands for: itself when it is an IP, else what it resolves to.
async fn resolve(url: &Url, port: u16) -> Result<Vec<IpAddr>, ApiError> {
    if let Some(ip) = literal_ip(url) {
        return Ok(vec![ip]);
    }
    match url.host() {
        Some(url::Host::Domain(name)) => {
            let lookup = tokio::net::lookup_host((name, port));
            let found = tokio::time::timeout(RESOLVE_TIMEOUT, lookup)
                .await
                .map_err(|_| {
                    ApiError::invalid(format!("Webhook host '{name}' does not resolve: timed out"))
                })?
                .map_err(|e| {
                    ApiError::invalid(format!("Webhook host '{name}' does not resolve: {e}"))
                })?;
            Ok(found.map(|a| a.ip()).collect())
        }
        _ => Err(ApiError::invalid("Invalid webhook hostname ''")),
    }
}

/// Why an address is not a public one, if it is not.
pub(crate) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) => {
            let [b0, b1, ..] = a.octets();
            if a.is_loopback() {
                Some("loopback")
            } else if a.is_private() {
                Some("private")
            } else if a.is_link_local() {
                Some("link-local")
            } else if a.is_unspecified() || b0 == 0 {
                Some("unspecified")
            } else if a.is_broadcast() || a.is_multicast() {
                Some("multicast or broadcast")
            } else if b0 == 100 && (b1 & 0xc0) == 64 {
                Some("shared (CGNAT)")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            if let Some(v4) = a.to_ipv4_mapped() {
                return non_public(IpAddr::V4(v4));
            }
            let first = a.segments()[0];
            if a.is_loopback() {
                Some("loopback")
            } else if a.is_unspecified() {
                Some("unspecified")
            } else if (first & 0xfe00) == 0xfc00 {
                Some("unique-local")
            } else if (first & 0xffc0) == 0xfe80 {
                Some("link-local")
            } else if a.is_multicast() {
                Some("multicast")
            } else {
                None
            }
        }
    }
}

/// A resolver that refuses a host name any of whose addresses the policy refuses, so that
/// a name that resolved to a public address when the run was created cannot be pointed at
/// the server's network before the call.
#[derive(Debug)]
struct Guarded {
    policy: WebhookPolicy,
}

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if let Some((ip, why)) = policy.first_refused(found.iter().map(SocketAddr::ip)) {
                let message = format!("{} is a {why} address ({ip})", name.as_str());
                return Err(message.into());
            }
            let addrs: Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

/// The server's webhook sender: its policy and one HTTP client, made on first use.
#[derive(Debug)]
pub(crate) struct Webhooks {
    policy: WebhookPolicy,
    client: OnceLock<Result<reqwest::Client, String>>,
}

/// What became of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Delivered,
    Failed,
}

impl Webhooks {
    pub(crate) fn new(policy: WebhookPolicy) -> Self {
        Self {
            policy,
            client: OnceLock::new(),
        }
    }

    /// Checks a run's `webhook` as given in its body: a string URL the policy accepts.
    pub(crate) async fn check(&self, webhook: Option<&Json>) -> Result<(), ApiError> {
        match webhook {
            None | Some(Json::Null) => Ok(()),
            Some(Json::String(url)) => self.policy.check(url).await.map(drop),
            Some(_) => Err(ApiError::invalid("invalid body: `webhook`: must be a URL")),
        }
    }

    fn client(&self) -> Result<&reqwest::Client, String> {
        self.client
            .get_or_init(|| {
                reqwest::Client::builder()
                    .timeout(self.policy.timeout)
                    .redirect(reqwest::redirect::Policy::none())
                    .dns_resolver(Arc::new(Guarded {
                        policy: self.policy.clone(),
                    }))
                    .user_agent(concat!("stategraph-server/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Sends `payload` to `url` in the background, with the policy's retries.
    pub(crate) fn send(self: &Arc<Self>, url: String, run_id: String, payload: Json) {
        if !self.policy.enabled {
            tracing::info!(
                run_id,
                "webhooks are disabled: not calling the run's webhook"
            );
            return;
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let outcome = this.deliver(&url, &run_id, &payload).await;
            let outcome = match outcome {
                Delivery::Delivered => "delivered",
                Delivery::Failed => "failed",
            };
            metrics::counter!("stategraph_server_webhooks_total", "outcome" => outcome)
                .increment(1);
        });
    }

    async fn deliver(&self, url: &str, run_id: &str, payload: &Json) -> Delivery {
        let parsed = Url::parse(url);
        // Where it goes, without a query string that may carry a secret.
        let shown = parsed.as_ref().map_or_else(
            |_| url.to_owned(),
            |u| format!("{}{}", u.origin().ascii_serialization(), u.path()),
        );
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(
                    run_id,
                    webhook = shown,
                    error = e,
                    "no HTTP client for webhooks"
                );
                return Delivery::Failed;
            }
        };
        // An IP in the URL itself does not go through the guarded resolver: checked here.
        let refused = match &parsed {
            Ok(u) => literal_ip(u).and_then(|ip| self.policy.refuses(ip)),
            Err(_) => Some("unparsable"),
        };
        if let Some(why) = refused {
            tracing::warn!(run_id, webhook = shown, "webhook refused: a {why} address");
            return Delivery::Failed;
        }
        let mut wait = self.policy.first_backoff;
        for attempt in 1..=self.policy.max_attempts {
            let last = attempt == self.policy.max_attempts;
            let retry = match client.post(url).json(payload).send().await {
                Ok(r) if r.status().is_success() => {
                    tracing::info!(
                        run_id,
                        webhook = shown,
                        status = r.status().as_u16(),
                        attempt,
                        "webhook delivered"
                    );
                    return Delivery::Delivered;
                }
                Ok(r) => {
                    let status = r.status();
                    let again = status.is_server_error() || status.as_u16() == 429;
                    tracing::warn!(
                        run_id,
                        webhook = shown,
                        status = status.as_u16(),
                        attempt,
                        retry = again && !last,
                        "webhook answered with an error"
                    );
                    again
                }
                Err(e) => {
                    tracing::warn!(
                        run_id,
                        webhook = shown,
                        error = %error_chain(&e),
                        attempt,
                        retry = !last,
                        "webhook call failed"
                    );
                    true
                }
            };
            if !retry || last {
                break;
            }
            tokio::time::sleep(wait).await;
            wait = wait.saturating_mul(2);
        }
        Delivery::Failed
    }
}

/// An error with its causes, `: `-separated (reqwest's own message hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(non_public(ip.parse().unwrap()).is_some(), "{ip}");
        }
        for ip in ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111", "100.128.0.1"] {
            assert_eq!(non_public(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[tokio::test]
    async fn urls_are_checked_against_the_policy() {
        let strict = WebhookPolicy::new();
        let err = |r: Result<Url, ApiError>| r.unwrap_err().detail;
        assert!(err(strict.check("http://127.0.0.1:9/hook").await).contains("loopback"));
        assert!(err(strict.check("http://[::1]/hook").await).contains("loopback"));
        assert!(err(strict.check("http://localhost/hook").await).contains("loopback"));
        assert!(err(strict.check("/internal").await).contains("Relative"));
        assert!(err(strict.check("ftp://1.1.1.1/x").await).contains("scheme 'ftp' not allowed"));
        assert!(err(strict.check("not a url").await).contains("Invalid webhook URL"));
        assert!(
            err(strict
                .check(&format!("http://1.1.1.1/{}", "a".repeat(5000)))
                .await)
            .contains("too long")
        );
        assert!(strict.check("http://1.1.1.1/hook").await.is_ok());
        let https = WebhookPolicy::new().require_https(true);
        assert!(err(https.check("http://1.1.1.1/hook").await).contains("https"));
        let local = WebhookPolicy::new().allow_private_networks(true);
        assert!(local.check("http://127.0.0.1:9/hook").await.is_ok());
        let domains = WebhookPolicy::new()
            .allow_private_networks(true)
            .allowed_domains(["localhost", "*.example.org"]);
        assert!(domains.host_allowed("localhost"));
        assert!(domains.host_allowed("a.example.org"));
        assert!(!domains.host_allowed("example.org"));
        assert!(!domains.host_allowed("badexample.org"));
        assert!(err(domains.check("http://127.0.0.1/hook").await).contains("not allowed"));
    }
}
