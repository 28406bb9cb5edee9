//! The HTTP client of the streamable HTTP transport: reqwest, with TLS through rustls on the
//! `ring` provider and webpki's root certificates (as the chat client), and the configured
//! headers checked before the first request.

use std::collections::HashMap;
use std::sync::Arc;

use reqwest_mcp::header::{HeaderName, HeaderValue};

/// Headers the transport sets itself.
const RESERVED: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// A reqwest client for MCP servers; `Err` says why none can be made.
pub(super) fn client() -> Result<reqwest_mcp::Client, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS set-up: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest_mcp::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| format!("HTTP client set-up: {e}"))
}

/// The configured headers, each checked: a name or value HTTP does not allow, or one the
/// transport sets itself, is named in the error.
pub(super) fn headers(
    given: &[(String, String)],
) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    given
        .iter()
        .map(|(name, value)| {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| format!("header name `{name}`: {e}"))?;
            if RESERVED.contains(&n.as_str()) {
                return Err(format!(
                    "header `{name}` is set by the MCP transport and cannot be given"
                ));
            }
            let v = HeaderValue::from_str(value)
                .map_err(|e| format!("value of header `{name}`: {e}"))?;
            Ok((n, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn bad_headers_are_named() {
        let bad = |n: &str, v: &str| headers(&[(n.into(), v.into())]).unwrap_err();
        assert!(bad("x y", "1").starts_with("header name `x y`"));
        assert!(bad("x-key", "a\nb").starts_with("value of header `x-key`"));
        assert!(bad("Accept", "text/plain").contains("set by the MCP transport"));
        assert_eq!(headers(&[("X-Key".into(), "1".into())]).unwrap().len(), 1);
    }

    #[test]
    fn a_client_is_made_without_a_process_wide_crypto_provider() {
        client().unwrap();
    }
}
