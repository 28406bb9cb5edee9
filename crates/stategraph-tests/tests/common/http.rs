//! Plain HTTP/1.1 requests to a server on loopback, one connection each, for the tests that
//! drive server processes without a client library.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value as Json;

/// One request on its own connection; the status code and the JSON body.
pub(crate) fn call(port: u16, method: &str, path: &str, body: Option<Json>) -> (u16, Json) {
    let (status, body) = call_raw(port, method, path, body);
    (status, serde_json::from_str(&body).unwrap_or(Json::Null))
}

/// One request on its own connection; the status code and the body as text (de-chunked).
pub(crate) fn call_raw(port: u16, method: &str, path: &str, body: Option<Json>) -> (u16, String) {
    call_with(port, method, path, body, &[])
}

/// [`call_raw`] with extra request headers.
pub(crate) fn call_with(
    port: u16,
    method: &str,
    path: &str,
    body: Option<Json>,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n{extra}\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    conn.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    if !head.to_lowercase().contains("transfer-encoding: chunked") {
        return (status, body.to_owned());
    }
    let mut rest = body;
    let mut text = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            return (status, text);
        }
        text.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
}
