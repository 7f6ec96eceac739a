//! What every request must look like before any route sees it: the checks
//! that keep browsers and sloppy framing out.
//!
//! - `Host` must be on the allow-list ([`HostRules`]): an IP literal, a
//!   `localhost` name, or a name given with `--allowed-hosts`; otherwise 421
//!   `host_not_allowed`. This is what defeats DNS rebinding: a page whose
//!   name was re-pointed at 127.0.0.1 still sends its own name as `Host`.
//!   HTTP/1.1 without `Host` is 400 `missing_host`; two `Host` headers, an
//!   empty one, or an absolute-form request target naming another host than
//!   `Host` are 400 (`field: host`): each could make two readers of the same
//!   request disagree about where it was sent.
//! - A method that no route of the path takes (`TRACE` on a read, `GET` on
//!   a write) is 405 `method_not_allowed` naming `method`, with `Allow`
//!   listing the ones it takes ([`Routes`], from the published
//!   description), before any check that depends on the method.
//! - A request that would change something (any method but GET, HEAD,
//!   OPTIONS) must send `Content-Type: application/json` (415 otherwise), so
//!   a cross-origin `<form>` or a `text/plain` fetch, which browsers send
//!   without asking, never reaches a handler; and a browser's `Origin`, when
//!   sent, must be this server or a name given with `--allowed-origins`
//!   (403 `cross_origin`). "This server" is the `Host` the request names,
//!   with the listen port when the `Host` carries none.
//! - A request to a route that reads no query (every POST, `/metrics`,
//!   `/openapi.json`) is refused with 400 naming the first parameter it
//!   carries, as the GET routes refuse parameters they do not take.
//! - `Transfer-Encoding` other than exactly `chunked`, and any
//!   `Content-Encoding` but `identity`, are refused: the server would
//!   otherwise read encoded bytes as JSON.
//!
//! Invariant: a refused request reaches no handler, so it changes nothing;
//! a refusal of a request that carries a body closes the connection (the
//! body was never read, so the stream cannot carry another request).

use super::{ApiError, is_mutating};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Version, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// The methods each path takes (`GET` brings `HEAD`), for the 405 a request
/// with another method gets. Paths not listed are the router's to answer.
#[derive(Debug, Clone, Default)]
pub struct Routes(Arc<HashMap<String, Vec<Method>>>);

impl Routes {
    /// The table of `(path, methods)`.
    pub fn new(routes: impl IntoIterator<Item = (String, Vec<Method>)>) -> Routes {
        let table = routes
            .into_iter()
            .map(|(path, mut methods)| {
                if methods.contains(&Method::GET) && !methods.contains(&Method::HEAD) {
                    methods.push(Method::HEAD);
                }
                (path, methods)
            })
            .collect();
        Routes(Arc::new(table))
    }

    /// The methods `path` takes, when it is a known path and `method` is not among them.
    fn refuses(&self, path: &str, method: &Method) -> Option<&[Method]> {
        self.0.get(path).filter(|allowed| !allowed.contains(method)).map(Vec::as_slice)
    }
}

/// Which `Host` names and browser origins a server answers.
#[derive(Debug, Clone)]
pub struct HostRules {
    /// Names accepted besides IP literals and `localhost` (lowercase); `None` accepts any.
    hosts: Option<Vec<String>>,
    /// Origins (`scheme://host[:port]`, lowercase) allowed to send mutating requests.
    origins: Vec<String>,
    /// The port the server listens on, which a `Host` without a port stands for.
    listen_port: Option<u16>,
    /// The methods each path takes.
    routes: Routes,
}

impl HostRules {
    /// `hosts`: extra names, or `["*"]` for any; `origins`: allowed browser origins.
    pub fn new(hosts: &[String], origins: &[String]) -> HostRules {
        let lower = |v: &[String]| v.iter().map(|s| s.trim().to_ascii_lowercase()).collect::<Vec<_>>();
        let hosts = if hosts.iter().any(|h| h.trim() == "*") { None } else { Some(lower(hosts)) };
        HostRules { hosts, origins: lower(origins), listen_port: None, routes: Routes::default() }
    }

    /// These rules answering 405 for a method no route of a path takes.
    pub fn with_routes(mut self, routes: Routes) -> HostRules {
        self.routes = routes;
        self
    }

    /// These rules for a server listening on `port`: a page at the listen
    /// address is same-origin even when its `Host` leaves the port out.
    pub fn with_listen_port(mut self, port: u16) -> HostRules {
        self.listen_port = Some(port);
        self
    }

    /// Whether a `Host` value (name or address, optional port) is accepted.
    pub fn allows_host(&self, host: &str) -> bool {
        let Some(extra) = &self.hosts else { return true };
        let name = host_name(host).to_ascii_lowercase();
        let name = name.strip_suffix('.').unwrap_or(&name);
        name.parse::<IpAddr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || extra.iter().any(|h| h == name)
    }

    /// Whether a browser page at `origin` may send a mutating request to a server reached as `host`.
    fn allows_origin(&self, origin: &str, host: &str) -> bool {
        let origin = origin.to_ascii_lowercase();
        let authority = origin.split_once("://").map_or("", |(_, rest)| rest);
        let host = host.to_ascii_lowercase();
        if authority == host || self.origins.contains(&origin) {
            return true;
        }
        // `Host: 127.0.0.1` from a page at `http://127.0.0.1:7070` on a server listening on 7070.
        let (origin_name, origin_port) = split_port(authority);
        let (host_name, host_port) = split_port(&host);
        origin_name == host_name && host_port.is_none() && origin_port.is_some() && origin_port == self.listen_port
    }
}

/// The defaults: IP literals and `localhost` names; no foreign origin.
impl Default for HostRules {
    fn default() -> HostRules {
        HostRules::new(&[], &[])
    }
}

/// The host part of a `Host` value: `[::1]:7070` gives `::1`, `example:80` gives `example`.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(h, _)| h);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// A `Host` or authority value as its name and its port, if it has one.
fn split_port(host: &str) -> (&str, Option<u16>) {
    let name = host_name(host);
    let port = host.rsplit_once(':').filter(|(before, _)| before.len() >= name.len()).and_then(|(_, p)| p.parse().ok());
    (name, port)
}

fn carries_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers.get(header::CONTENT_LENGTH).is_some_and(|v| v.as_bytes() != b"0")
}

/// The first rule `req` breaks, as its answer.
fn check(rules: &HostRules, req: &Request) -> Result<(), ApiError> {
    let headers = req.headers();
    if headers.get_all(header::HOST).iter().nth(1).is_some() {
        return Err(ApiError::field("host", "send one Host header, not several"));
    }
    if let Some(h) = headers.get(header::HOST) {
        if h.as_bytes().trim_ascii().is_empty() {
            return Err(ApiError::field("host", "Host is empty"));
        }
        if let Some(authority) = req.uri().authority()
            && !authority.as_str().eq_ignore_ascii_case(h.to_str().unwrap_or("").trim())
        {
            return Err(ApiError::field("host", "the request target names another host than the Host header"));
        }
    }
    let host = match (headers.get(header::HOST), req.uri().authority()) {
        (Some(h), _) => h.to_str().map_err(|_| ApiError::field("host", "Host is not ASCII"))?.to_owned(),
        (None, Some(authority)) => authority.as_str().to_owned(),
        (None, None) if req.version() >= Version::HTTP_11 => {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, "missing_host", "HTTP/1.1 requests must send Host")
                .with_field("host"));
        }
        (None, None) => String::new(),
    };
    if !host.is_empty() && !rules.allows_host(&host) {
        let message = format!(
            "Host {host:?} is not served here; start the server with --allowed-hosts {} to serve it",
            host_name(&host)
        );
        return Err(ApiError::new(StatusCode::MISDIRECTED_REQUEST, "host_not_allowed", message).with_field("host"));
    }
    if let Some(allowed) = rules.routes.refuses(req.uri().path(), req.method()) {
        let names: Vec<&str> = allowed.iter().map(Method::as_str).collect();
        let message = format!("{} takes {}, not {}", req.uri().path(), names.join(", "), req.method());
        return Err(ApiError::new(StatusCode::METHOD_NOT_ALLOWED, METHOD_NOT_ALLOWED, message).with_field("method"));
    }
    if is_mutating(req.method()) || matches!(req.uri().path(), "/metrics" | "/openapi.json") {
        super::query::Params::parse(req.uri().query(), &[])?;
    }
    if let Some(te) = headers.get(header::TRANSFER_ENCODING)
        && !te.as_bytes().trim_ascii().eq_ignore_ascii_case(b"chunked")
    {
        return Err(ApiError::field("transfer-encoding", "only `Transfer-Encoding: chunked` is accepted"));
    }
    if let Some(ce) = headers.get(header::CONTENT_ENCODING)
        && !ce.as_bytes().trim_ascii().eq_ignore_ascii_case(b"identity")
    {
        let message = "request bodies must not be content-encoded";
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_encoding", message)
            .with_field("content-encoding"));
    }
    if is_mutating(req.method()) {
        if !is_json(headers.get(header::CONTENT_TYPE)) {
            let message = "request bodies must be sent as `Content-Type: application/json`";
            return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message)
                .with_field("content-type"));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !rules.allows_origin(origin, &host) {
                let message = format!(
                    "a page at {origin:?} may not change data here; start the server with --allowed-origins {origin} to allow it"
                );
                return Err(ApiError::new(StatusCode::FORBIDDEN, "cross_origin", message).with_field("origin"));
            }
        }
    }
    Ok(())
}

/// The code of the 405 for a method the path does not take.
const METHOD_NOT_ALLOWED: &str = "method_not_allowed";

/// `application/json`, any case, with or without parameters (`; charset=utf-8`).
fn is_json(value: Option<&HeaderValue>) -> bool {
    let Some(value) = value.and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Middleware: answers a request that breaks a rule, passes the rest on.
pub async fn enforce(State(rules): State<Arc<HostRules>>, req: Request, next: Next) -> Response {
    match check(&rules, &req) {
        Ok(()) => next.run(req).await,
        Err(error) => {
            let close = carries_body(req.headers());
            let allow = (error.code == METHOD_NOT_ALLOWED)
                .then(|| rules.routes.refuses(req.uri().path(), req.method()))
                .flatten()
                .map(|allowed| allowed.iter().map(Method::as_str).collect::<Vec<_>>().join(", "));
            let mut response = error.into_response();
            if let Some(allow) = allow.and_then(|a| HeaderValue::from_str(&a).ok()) {
                response.headers_mut().insert(header::ALLOW, allow);
            }
            if close {
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
    }
}

/// Wraps `app` so every request passes [`enforce`].
pub fn protect(app: axum::Router, rules: HostRules) -> axum::Router {
    app.layer(axum::middleware::from_fn_with_state(Arc::new(rules), enforce))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn request(method: Method, headers: &[(&str, &str)]) -> Request {
        let mut b = Request::builder().method(method).uri("/v1/storage/write");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(axum::body::Body::empty()).unwrap()
    }

    fn code(rules: &HostRules, req: Request) -> Option<&'static str> {
        check(rules, &req).err().map(|e| e.code)
    }

    #[test]
    fn hosts_on_the_list_and_ip_literals_pass() {
        let rules = HostRules::new(&["fencing.internal".into()], &[]);
        for ok in [
            "127.0.0.1:7070",
            "[::1]:7070",
            "localhost",
            "LOCALHOST:1",
            "api.localhost",
            "10.0.0.7",
            "fencing.internal:7070",
            "fencing.internal.",
        ] {
            assert!(rules.allows_host(ok), "{ok}");
        }
        for bad in ["evil.example", "evil.example:7070", "localhost.evil.example", "fencing.internal.evil"] {
            assert!(!rules.allows_host(bad), "{bad}");
        }
        assert!(HostRules::new(&["*".into()], &[]).allows_host("evil.example"));
    }

    #[test]
    fn a_rebinding_page_is_refused_even_for_reads() {
        let rules = HostRules::default();
        let req = request(Method::GET, &[("host", "rebind.example:7070")]);
        assert_eq!(code(&rules, req), Some("host_not_allowed"));
    }

    #[test]
    fn writes_need_json_and_a_same_origin_or_allowed_page() {
        let rules = HostRules::new(&[], &["https://app.example".into()]);
        let json = ("content-type", "application/json; charset=utf-8");
        let host = ("host", "127.0.0.1:7070");
        assert_eq!(code(&rules, request(Method::POST, &[host, json])), None);
        assert_eq!(
            code(&rules, request(Method::POST, &[host, ("content-type", "text/plain")])),
            Some("unsupported_media_type")
        );
        assert_eq!(code(&rules, request(Method::POST, &[host])), Some("unsupported_media_type"));
        assert_eq!(code(&rules, request(Method::GET, &[host])), None, "reads carry no body");
        let page = |o: &'static str| request(Method::POST, &[host, json, ("origin", o)]);
        assert_eq!(code(&rules, page("http://evil.example")), Some("cross_origin"));
        assert_eq!(code(&rules, page("null")), Some("cross_origin"));
        assert_eq!(code(&rules, page("http://127.0.0.1:7070")), None, "same origin");
        assert_eq!(code(&rules, page("https://app.example")), None, "allowed origin");
    }

    #[test]
    fn framing_the_server_would_misread_is_refused() {
        let rules = HostRules::default();
        let host = ("host", "127.0.0.1");
        let json = ("content-type", "application/json");
        let te = |v: &'static str| request(Method::POST, &[host, json, ("transfer-encoding", v)]);
        assert_eq!(code(&rules, te("gzip, chunked")), Some("invalid_field"));
        assert_eq!(code(&rules, te("Chunked")), None);
        let ce = request(Method::POST, &[host, json, ("content-encoding", "gzip")]);
        assert_eq!(code(&rules, ce), Some("unsupported_encoding"));
        let mut no_host = request(Method::GET, &[]);
        *no_host.version_mut() = Version::HTTP_11;
        assert_eq!(code(&rules, no_host), Some("missing_host"));
        let mut old = request(Method::GET, &[]);
        *old.version_mut() = Version::HTTP_10;
        assert_eq!(code(&rules, old), None, "HTTP/1.0 need not send Host");
    }

    #[test]
    fn routes_that_read_no_query_refuse_one() {
        let rules = HostRules::default();
        let at = |method: Method, target: &str| {
            let mut req = request(method, &[("host", "127.0.0.1"), ("content-type", "application/json")]);
            *req.uri_mut() = target.parse().unwrap();
            check(&rules, &req).err().map(|e| (e.code, e.field))
        };
        let refused = |field: &str| Some(("invalid_field", Some(field.to_owned())));
        assert_eq!(at(Method::POST, "/v1/storage/write?debug=1"), refused("debug"));
        assert_eq!(at(Method::GET, "/metrics?x=1"), refused("x"));
        assert_eq!(at(Method::GET, "/openapi.json?format=yaml"), refused("format"));
        assert_eq!(at(Method::POST, "/v1/storage/write"), None);
        assert_eq!(at(Method::POST, "/v1/storage/write?"), None, "an empty query carries nothing");
        assert_eq!(at(Method::GET, "/v1/storage/fence?resource_id=a"), None, "GET routes check their own");
    }

    #[test]
    fn a_method_the_path_does_not_take_is_405_before_anything_else() {
        let rules = HostRules::default().with_routes(Routes::new([
            ("/v1/storage/read".to_owned(), vec![Method::GET]),
            ("/v1/storage/write".to_owned(), vec![Method::POST]),
        ]));
        let at = |method: Method, path: &str| {
            let mut req = request(method, &[("host", "127.0.0.1")]);
            *req.uri_mut() = path.parse().unwrap();
            check(&rules, &req).err().map(|e| (e.status, e.code, e.field))
        };
        let refused = Some((StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", Some("method".to_owned())));
        assert_eq!(at(Method::TRACE, "/v1/storage/read"), refused, "not 415: TRACE carries no body to type");
        assert_eq!(at(Method::PUT, "/v1/storage/read"), refused);
        assert_eq!(at(Method::GET, "/v1/storage/write"), refused);
        assert_eq!(at(Method::HEAD, "/v1/storage/read"), None, "GET brings HEAD");
        assert_eq!(at(Method::GET, "/v1/storage/read"), None);
        assert_eq!(at(Method::POST, "/v1/storage/write").map(|e| e.1), Some("unsupported_media_type"));
        assert_eq!(
            at(Method::TRACE, "/elsewhere").map(|e| e.1),
            Some("unsupported_media_type"),
            "unknown paths are the router's"
        );
    }

    #[test]
    fn hosts_that_readers_could_disagree_about_are_refused() {
        let rules = HostRules::default();
        let two = request(Method::GET, &[("host", "127.0.0.1:7070"), ("host", "evil.example")]);
        assert_eq!(code(&rules, two), Some("invalid_field"));
        assert_eq!(code(&rules, request(Method::GET, &[("host", "")])), Some("invalid_field"));
        assert_eq!(code(&rules, request(Method::GET, &[("host", "  ")])), Some("invalid_field"));
        let absolute = |target: &str, host: &'static str| {
            let mut req = request(Method::GET, &[("host", host)]);
            *req.uri_mut() = target.parse().unwrap();
            req
        };
        let other = absolute("http://evil.example/v1/storage/fence/a", "127.0.0.1:7070");
        assert_eq!(code(&rules, other), Some("invalid_field"));
        let same = absolute("http://127.0.0.1:7070/v1/storage/fence/a", "127.0.0.1:7070");
        assert_eq!(code(&rules, same), None, "an absolute-form target that agrees with Host");
        let e = check(&rules, &request(Method::GET, &[("host", "")])).unwrap_err();
        assert_eq!((e.status, e.field.as_deref()), (StatusCode::BAD_REQUEST, Some("host")));
    }

    #[test]
    fn the_listen_address_is_same_origin_with_or_without_the_port_in_host() {
        let rules = HostRules::default().with_listen_port(7070);
        let json = ("content-type", "application/json");
        let page = |host: &'static str, origin: &'static str| {
            request(Method::POST, &[("host", host), json, ("origin", origin)])
        };
        assert_eq!(code(&rules, page("127.0.0.1", "http://127.0.0.1:7070")), None);
        assert_eq!(code(&rules, page("127.0.0.1:7070", "http://127.0.0.1:7070")), None);
        assert_eq!(code(&rules, page("[::1]", "http://[::1]:7070")), None);
        assert_eq!(code(&rules, page("127.0.0.1", "http://127.0.0.1:8080")), Some("cross_origin"));
        assert_eq!(code(&rules, page("127.0.0.1", "http://localhost:7070")), Some("cross_origin"));
        assert_eq!(code(&rules, page("127.0.0.1:9", "http://127.0.0.1:7070")), Some("cross_origin"));
        let without = HostRules::default();
        assert_eq!(code(&without, page("127.0.0.1", "http://127.0.0.1:7070")), Some("cross_origin"));
    }
}
