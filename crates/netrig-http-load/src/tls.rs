//! HTTPS: a rustls client per connection, fed through the connection's
//! non-blocking socket.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io::{self, Read, Write};
use std::sync::Arc;

/// The system's CA bundle (Debian's ca-certificates), used without `--cacert`.
pub const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// What every HTTPS connection of a run uses.
#[derive(Clone, Debug)]
pub struct Tls {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

impl Tls {
    /// A client for `server_name` trusting the CAs in `ca_file` (`--cacert`, PEM; the
    /// system's bundle when `None`), or any certificate with `insecure`.
    pub fn new(server_name: &str, ca_file: Option<&str>, insecure: bool) -> Result<Tls, String> {
        let name = ServerName::try_from(server_name.to_string())
            .map_err(|e| format!("{server_name:?} is not a TLS server name ({e})"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let config = if insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
                .with_no_client_auth()
        } else {
            let path = ca_file.unwrap_or(SYSTEM_CAS);
            let option = if ca_file.is_some() {
                "--cacert"
            } else {
                "the system's CA bundle"
            };
            let mut roots = RootCertStore::empty();
            let certs = read_pem_certs(path).map_err(|e| format!("{option} {path}: {e}"))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("{option} {path}: no usable CA certificate in it"));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        Ok(Tls {
            config: Arc::new(config),
            server_name: name,
        })
    }

    pub(crate) fn connect(&self) -> io::Result<rustls::ClientConnection> {
        rustls::ClientConnection::new(self.config.clone(), self.server_name.clone()).map_err(io::Error::other)
    }
}

/// The certificates of a PEM file (bounded: at most 16 MiB read).
fn read_pem_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > 16 << 20 {
        return Err("larger than 16 MiB".into());
    }
    CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// `--insecure`: any certificate is taken; signatures are still checked.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Moves TLS records between `tls` and `sock`: writes what rustls has
/// queued, reads what the socket has (until rustls wants no more), and
/// processes it.
pub(crate) fn pump<S: Read + Write>(tls: &mut rustls::ClientConnection, sock: &mut S) -> io::Result<Pumped> {
    let mut got = Pumped::Blocked;
    flush(tls, sock)?;
    while tls.wants_read() {
        match tls.read_tls(sock) {
            Ok(0) => {
                got = Pumped::Eof;
                break;
            }
            Ok(_) => {
                tls.process_new_packets().map_err(io::Error::other)?;
                got = Pumped::More;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                got = Pumped::Blocked;
                break;
            }
            Err(e) => return Err(e),
        }
    }
    // Records processed may have queued answers (handshake, key updates).
    flush(tls, sock)?;
    Ok(got)
}

/// What the socket had when [`pump`] stopped reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pumped {
    /// It would block: wait for the next readiness.
    Blocked,
    /// rustls is full: take its plaintext and pump again.
    More,
    /// The peer closed.
    Eof,
}

fn flush<S: Write>(tls: &mut rustls::ClientConnection, sock: &mut S) -> io::Result<()> {
    while tls.wants_write() {
        match tls.write_tls(sock) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Why a TLS connection failed, in words, when rustls refused it (the
/// server's certificate, its alerts, a peer that does not speak TLS);
/// `None` for an error of the socket (counted by its errno).
pub fn reason(e: &io::Error) -> Option<String> {
    let r = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(describe(r))
}

/// A rustls error as a user reads it: the cause named once (untrusted
/// issuer, name mismatch, expired, ...), rustls's own words after it.
pub fn describe(e: &rustls::Error) -> String {
    use rustls::{CertificateError as C, Error as E};
    let what = match e {
        E::InvalidCertificate(c) => match c {
            C::UnknownIssuer => {
                "the server's certificate is not signed by a trusted CA (untrusted issuer: \
                                 self-signed, or a private CA)"
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "the server's certificate is not valid for the name asked (name mismatch: the URL's host, or \
                 --host-header)"
            }
            C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired",
            C::NotValidYet | C::NotValidYetContext { .. } => "the server's certificate is not valid yet",
            C::Revoked => "the server's certificate is revoked",
            C::BadSignature => "the server's certificate has a bad signature",
            C::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
                "the server's certificate is a CA certificate used as a server's (untrusted issuer; \
                 `openssl req -x509` makes one unless told -addext basicConstraints=critical,CA:FALSE)"
            }
            _ => "the server's certificate was refused",
        },
        E::AlertReceived(_) => "the server refused the handshake",
        E::InvalidMessage(_) | E::InappropriateMessage { .. } | E::InappropriateHandshakeMessage { .. } => {
            "the server did not answer in TLS (is it plain HTTP? then use http://)"
        }
        E::PeerIncompatible(_) => "the server offers no TLS version or cipher this client takes",
        E::NoCertificatesPresented => "the server presented no certificate",
        _ => "the TLS handshake failed",
    };
    format!("{what} ({e})")
}

/// The reason names the server's certificate: trusting it (`--insecure`,
/// `--cacert`) is what can change it.
pub fn is_certificate(e: &rustls::Error) -> bool {
    matches!(e, rustls::Error::InvalidCertificate(_))
}
