//! JSON answers for the requests hyper refuses before any route sees them.
//!
//! hyper answers a request head it cannot parse by itself, with an empty
//! body and no `Content-Type`: 400 (a malformed request line or header, such
//! as `Transfer-Encoding: identity`), 414 (a URI over its limit) and 431 (a
//! head over its limit), and then closes the connection. Every other answer
//! of this server comes from the router and carries a `Content-Type`. So the
//! connection's writer (`conn.rs`) recognizes hyper's own answer by exactly
//! that shape and sends [`json_answer`] in its place: the same error body
//! every other refusal has, naming what was at fault.

/// The JSON answer to send instead of `head`, when `head` is one of hyper's
/// automatic answers (a whole head: status line, headers, blank line, and
/// nothing after it).
pub fn json_answer(head: &[u8]) -> Option<Vec<u8>> {
    let status = head.strip_prefix(b"HTTP/1.1 ")?.get(..3)?;
    let (status_line, code, field, message) = match status {
        b"400" => (
            "400 Bad Request",
            "malformed_request",
            "head",
            "the request line or a header could not be parsed (for example a Transfer-Encoding other than \
             chunked, or a malformed Content-Length)",
        ),
        b"414" => ("414 URI Too Long", "uri_too_long", "uri", "the request URI is longer than the server reads"),
        b"431" => (
            "431 Request Header Fields Too Large",
            "headers_too_large",
            "headers",
            "the request's headers are larger, or more, than the server reads",
        ),
        _ => return None,
    };
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    if end + 4 != head.len() || has_header(&head[..end], b"content-type") {
        return None;
    }
    let body = format!(r#"{{"error":{{"code":"{code}","message":"{message}","field":"{field}"}}}}"#);
    let answer = format!(
        "HTTP/1.1 {status_line}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    Some(answer.into_bytes())
}

/// Whether the header lines in `head` include `name` (lowercase).
fn has_header(head: &[u8], name: &[u8]) -> bool {
    head.split(|&b| b == b'\n').skip(1).any(|line| {
        line.iter().position(|&b| b == b':').is_some_and(|colon| line[..colon].trim_ascii().eq_ignore_ascii_case(name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_own_answers_become_json() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let answer = String::from_utf8(json_answer(head).expect("replaced")).unwrap();
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
        let body: serde_json::Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(
            (body["error"]["code"].as_str(), body["error"]["field"].as_str()),
            (Some("headers_too_large"), Some("headers"))
        );
        let length: usize =
            answer.split("content-length: ").nth(1).unwrap().split("\r\n").next().unwrap().parse().unwrap();
        assert_eq!(length, answer.split("\r\n\r\n").nth(1).unwrap().len());
        for status in ["400 Bad Request", "414 URI Too Long"] {
            let head = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
            assert!(json_answer(head.as_bytes()).is_some(), "{status}");
        }
    }

    #[test]
    fn the_routers_answers_pass_untouched() {
        // A router answer has a Content-Type; other statuses and partial heads are not hyper's.
        let routed = b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\ncontent-length: 2\r\n\r\n";
        assert_eq!(json_answer(routed), None);
        assert_eq!(json_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"), None);
        assert_eq!(json_answer(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n"), None);
        assert_eq!(json_answer(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}"), None);
        assert_eq!(json_answer(b"{\"HTTP/1.1 400 \"}"), None);
    }
}
