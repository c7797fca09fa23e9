//! HTTPS against a rustls server in the test, with an rcgen certificate.

mod common;

use netrig_http_load::tls::Tls;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct TlsServer {
    addr: std::net::SocketAddr,
    requests: Arc<AtomicU64>,
    cert_pem: String,
}

fn tls_server() -> TlsServer {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let der = CertificateDer::from(cert.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der], key)
            .unwrap(),
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let requests = Arc::new(AtomicU64::new(0));
    let r = requests.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().take(64) {
            let Ok(conn) = conn else { continue };
            let (config, r) = (config.clone(), r.clone());
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let tls = rustls::ServerConnection::new(config).unwrap();
                let mut s = rustls::StreamOwned::new(tls, conn);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    buf.drain(..end);
                    r.fetch_add(1, Ordering::Relaxed);
                    let body = "x".repeat(2048);
                    let resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                    if s.write_all(resp.as_bytes()).and_then(|_| s.flush()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    TlsServer {
        addr,
        requests,
        cert_pem: cert.cert.pem(),
    }
}

#[test]
fn https_with_insecure_and_with_the_ca_file() {
    let s = tls_server();
    let mut c = common::config(s.addr);
    c.requests = Some(200);
    c.tls = Some(Tls::new("localhost", None, true).unwrap());
    let r = common::run(&c);
    assert_eq!(r.window.errors.total(), 0, "{:?}", r.window.errors);
    assert_eq!(r.window.responses, 200);
    assert_eq!(r.window.body_bytes, 200 * 2048);

    let dir = std::env::temp_dir().join(format!("netrig-http-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &s.cert_pem).unwrap();
    let mut c2 = c.clone();
    c2.new_conn = true;
    c2.requests = Some(50);
    c2.tls = Some(Tls::new("localhost", Some(ca.to_str().unwrap()), false).unwrap());
    let r = common::run(&c2);
    assert_eq!(r.window.errors.total(), 0, "{:?}", r.window.errors);
    assert_eq!(r.window.responses, 50);
    assert_eq!(r.window.connections, 50, "a handshake per request");
    assert_eq!(s.requests.load(Ordering::Relaxed), 250);

    // The right CA for another name: every connection refused the same
    // way, so the run stops at once and names the cause.
    let mut c3 = c.clone();
    c3.requests = Some(4);
    c3.tls = Some(Tls::new("example.org", Some(ca.to_str().unwrap()), false).unwrap());
    let e = netrig_http_load::run(&c3, &|| None, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("name mismatch") && e.contains("--insecure"), "{e}");
    assert!(Tls::new("localhost", Some("/nonexistent/ca.pem"), false)
        .unwrap_err()
        .contains("--cacert /nonexistent/ca.pem"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A self-signed server and the system's CAs (what a user gets without
/// -k): every connection fails the same way, the run stops within a
/// fraction of its length, and the error names the cause once (untrusted
/// issuer) and the options that change it.
#[test]
fn an_untrusted_certificate_stops_the_run_and_says_why() {
    let s = tls_server();
    let mut c = common::config(s.addr);
    c.connections = 4;
    c.threads = 2;
    c.duration = Duration::from_secs(20);
    c.tls = Some(Tls::new("localhost", None, false).unwrap());
    let t = std::time::Instant::now();
    let e = netrig_http_load::run(&c, &|| None, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "stopped after {:?}",
        t.elapsed()
    );
    assert!(e.contains("untrusted issuer"), "{e}");
    assert!(e.contains("-k/--insecure") && e.contains("--cacert FILE"), "{e}");
    assert_eq!(e.matches("untrusted issuer").count(), 1, "named once: {e}");
    assert_eq!(s.requests.load(Ordering::Relaxed), 0);
}

/// rustls's errors named as a user reads them.
#[test]
fn tls_errors_are_described_by_cause() {
    use netrig_http_load::tls::{describe, is_certificate};
    use rustls::{CertificateError as C, Error as E};
    let unknown = E::InvalidCertificate(C::UnknownIssuer);
    assert!(describe(&unknown).contains("untrusted issuer") && is_certificate(&unknown));
    assert!(describe(&E::InvalidCertificate(C::NotValidForName)).contains("name mismatch"));
    assert!(describe(&E::InvalidCertificate(C::Expired)).contains("expired"));
    let plain = E::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
    assert!(describe(&plain).contains("plain HTTP") && !is_certificate(&plain));
}
