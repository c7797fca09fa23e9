//! A scraper's request, judged: the whole request head a metrics port read (up to its blank
//! line), and what to answer. Pure, so that a fuzz target can feed it any bytes
//! (`metrics_request`); the agent's listener bounds the head's size and time before it.

/// What a request head asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scrape {
    /// `GET /metrics` (any query): the metrics, as OpenMetrics text when the Accept header
    /// asks for it, else the classic text.
    Metrics { openmetrics: bool },
    /// Refused: the status and its words.
    Refused(u16, &'static str),
}

/// The most headers a request may have (a scraper sends a handful).
pub const MAX_HEADERS: usize = 64;

/// Every status [`request`] refuses with.
pub const REFUSALS: [u16; 4] = [400, 404, 405, 431];

/// Judges a request head.
pub fn request(head: &[u8]) -> Scrape {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Err(httparse::Error::TooManyHeaders) => return Scrape::Refused(431, "more than 64 headers\n"),
        _ => return Scrape::Refused(400, "not an HTTP/1.x request\n"),
    }
    let path = req.path.unwrap_or("");
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    if path != "/metrics" {
        return Scrape::Refused(404, "the agent's metrics are at /metrics\n");
    }
    if req.method != Some("GET") {
        return Scrape::Refused(405, "only GET /metrics\n");
    }
    let accept = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("accept"))
        .filter_map(|h| std::str::from_utf8(h.value).ok())
        .collect::<Vec<_>>()
        .join(",");
    Scrape::Metrics {
        openmetrics: crate::accepts_openmetrics(&accept),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_is_a_get_of_metrics_and_its_accept_chooses_the_format() {
        let get = |accept: &str| {
            request(format!("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: {accept}\r\n\r\n").as_bytes())
        };
        assert_eq!(
            get("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"),
            Scrape::Metrics { openmetrics: true }
        );
        assert_eq!(get("text/plain"), Scrape::Metrics { openmetrics: false });
        assert_eq!(
            request(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Scrape::Refused(405, "only GET /metrics\n")
        );
        assert!(matches!(
            request(b"GET / HTTP/1.1\r\n\r\n"),
            Scrape::Refused(404, _)
        ));
        assert!(matches!(
            request(b"\x00\xff garbage\r\n\r\n"),
            Scrape::Refused(400, _)
        ));
        let many: String = (0..65).map(|i| format!("X-{i}: y\r\n")).collect();
        assert!(matches!(
            request(format!("GET /metrics HTTP/1.1\r\n{many}\r\n").as_bytes()),
            Scrape::Refused(431, _)
        ));
    }
}
