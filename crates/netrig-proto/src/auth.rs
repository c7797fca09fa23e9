//! Authentication of a control session: Ed25519 keys, the handshake's
//! transcript, and the signatures over it and over each test request.
//!
//! The handshake (docs/PROTOCOL.md, "Authentication"):
//!
//! 1. `welcome` carries a fresh 32-byte agent nonce, whether the agent
//!    requires authentication, and the agent's public key when it has one.
//! 2. `hello` carries a fresh 32-byte client nonce, the client's public key
//!    when it has one, and the client's signature of the transcript.
//! 3. `hello_accepted` carries the agent's signature of the same transcript
//!    (when it has a key), or the agent answers `error` naming why it refuses.
//!
//! The transcript hash is SHA-256 over a domain tag, the protocol version,
//! the `required` flag, both nonces and both public keys (each present or
//! absent). Each side signs its own role's tag followed by that hash, so a
//! signature from one role or one session is worth nothing in another. Every
//! `test_request` of an authenticated client then carries a per-session
//! counter (0, 1, …) and a signature over (tag, transcript hash, counter,
//! the spec's bytes): a request cannot be altered, replayed in this session
//! or carried into another one.
//!
//! Everything here is pure; random numbers come from the operating system
//! (`getrandom`).

use crate::TestSpec;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::fmt;

/// The first word of a public key line (`netrig-ed25519 BASE64 comment`).
pub const PUBLIC_KEY_TAG: &str = "netrig-ed25519";
/// The first word of a private key file's line.
pub const PRIVATE_KEY_TAG: &str = "netrig-ed25519-private";
/// Length of each side's nonce.
pub const NONCE_LEN: usize = 32;

const TRANSCRIPT_TAG: &[u8] = b"netrig-auth-v1 transcript\0";
const AGENT_TAG: &[u8] = b"netrig-auth-v1 agent\0";
const CLIENT_TAG: &[u8] = b"netrig-auth-v1 client\0";
const REQUEST_TAG: &[u8] = b"netrig-auth-v1 test_request\0";
const INITIATE_TAG: &[u8] = b"netrig-auth-v1 initiate\0";

/// Why authentication failed, in words for the peer and the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("authentication required: this agent serves only clients with an authorized key (the client's --key FILE)")]
    Required,
    #[error("unknown key {0}: it is not in the agent's --authorized-keys")]
    UnknownKey(String),
    #[error("bad signature: {0}")]
    BadSignature(String),
    #[error("replay: {0}")]
    Replay(String),
    #[error("agent key mismatch: {0}")]
    AgentKey(String),
    #[error("{0}")]
    Malformed(String),
}

/// Fixed-size bytes that travel as standard base64 in JSON.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bytes<const N: usize>(pub [u8; N]);

impl<const N: usize> Bytes<N> {
    pub fn from_base64(s: &str) -> Result<Self, AuthError> {
        let v = B64
            .decode(s.trim())
            .map_err(|e| AuthError::Malformed(format!("not base64 ({e})")))?;
        let a: [u8; N] = v
            .try_into()
            .map_err(|v: Vec<u8>| AuthError::Malformed(format!("{} bytes of base64, not {N}", v.len())))?;
        Ok(Bytes(a))
    }

    /// Fresh random bytes from the operating system.
    pub fn random() -> Self {
        let mut b = [0u8; N];
        getrandom::fill(&mut b).expect("the operating system's random numbers");
        Bytes(b)
    }
}

impl<const N: usize> fmt::Display for Bytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&B64.encode(self.0))
    }
}

impl<const N: usize> fmt::Debug for Bytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({self})")
    }
}

impl<const N: usize> Serialize for Bytes<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de, const N: usize> Deserialize<'de> for Bytes<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Bytes::from_base64(&s).map_err(serde::de::Error::custom)
    }
}

pub type Nonce = Bytes<NONCE_LEN>;
pub type Signature = Bytes<64>;

/// An Ed25519 public key, as it travels (base64 of its 32 bytes).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PublicKey(pub Bytes<32>);

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.0)
    }
}

impl fmt::Display for PublicKey {
    /// As messages name a key: `netrig-ed25519 BASE64`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_KEY_TAG} {}", self.0)
    }
}

impl PublicKey {
    /// A key as written by `netrig keygen` (`netrig-ed25519 BASE64 [comment]`)
    /// or its base64 alone.
    pub fn parse(text: &str) -> Result<PublicKey, AuthError> {
        let mut words = text.split_whitespace();
        let first = words
            .next()
            .ok_or_else(|| AuthError::Malformed("an empty public key".into()))?;
        let b64 = if first == PUBLIC_KEY_TAG {
            words
                .next()
                .ok_or_else(|| AuthError::Malformed(format!("{PUBLIC_KEY_TAG} without its base64 key")))?
        } else if first == PRIVATE_KEY_TAG {
            return Err(AuthError::Malformed(
                "this is a private key; give the public one (its .pub file)".into(),
            ));
        } else {
            first
        };
        let b = Bytes::<32>::from_base64(b64)
            .map_err(|e| AuthError::Malformed(format!("public key {b64:?}: {e}")))?;
        VerifyingKey::from_bytes(&b.0)
            .map_err(|_| AuthError::Malformed(format!("public key {b64:?}: not an Ed25519 point")))?;
        Ok(PublicKey(b))
    }

    fn verifying(&self) -> Result<VerifyingKey, AuthError> {
        VerifyingKey::from_bytes(&self.0 .0)
            .map_err(|_| AuthError::BadSignature(format!("key {self} is not an Ed25519 point")))
    }

    fn verify(&self, msg: &[u8], sig: &Signature, what: &str) -> Result<(), AuthError> {
        let sig = ed25519_dalek::Signature::from_bytes(&sig.0);
        self.verifying()?
            .verify_strict(msg, &sig)
            .map_err(|_| AuthError::BadSignature(format!("{what} does not verify with key {self}")))
    }
}

/// The keys of an `--authorized-keys` file: one public key per line
/// (`netrig-ed25519 BASE64 [comment]`); blank lines and lines starting with
/// `#` are skipped. Errors name the line.
pub fn parse_authorized_keys(text: &str) -> Result<Vec<PublicKey>, String> {
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !line.starts_with(PUBLIC_KEY_TAG) || line.starts_with(PRIVATE_KEY_TAG) {
            return Err(format!(
                "line {}: not a `{PUBLIC_KEY_TAG} BASE64 comment` line",
                i + 1
            ));
        }
        keys.push(PublicKey::parse(line).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(keys)
}

/// An Ed25519 private key.
#[derive(Clone)]
pub struct SecretKey(SigningKey);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey({})", self.public())
    }
}

/// Two keys are the same when their public halves are.
impl PartialEq for SecretKey {
    fn eq(&self, other: &Self) -> bool {
        self.public() == other.public()
    }
}

impl SecretKey {
    /// A new key from the operating system's random numbers.
    pub fn generate() -> SecretKey {
        SecretKey(SigningKey::from_bytes(&Bytes::<32>::random().0))
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(Bytes(self.0.verifying_key().to_bytes()))
    }

    /// The private key file's text: `netrig-ed25519-private BASE64(seed)`.
    pub fn to_file_text(&self) -> String {
        format!("{PRIVATE_KEY_TAG} {}\n", Bytes(self.0.to_bytes()))
    }

    /// Reads a private key file's text (as [`SecretKey::to_file_text`] writes it).
    pub fn parse(text: &str) -> Result<SecretKey, AuthError> {
        let mut words = text.split_whitespace();
        match (words.next(), words.next()) {
            (Some(PRIVATE_KEY_TAG), Some(b64)) => {
                let seed = Bytes::<32>::from_base64(b64)
                    .map_err(|e| AuthError::Malformed(format!("private key: {e}")))?;
                Ok(SecretKey(SigningKey::from_bytes(&seed.0)))
            }
            (Some(PUBLIC_KEY_TAG), _) => Err(AuthError::Malformed(
                "this is a public key; give the private key file (the one without .pub)".into(),
            )),
            _ => Err(AuthError::Malformed(format!(
                "not a netrig private key (a `{PRIVATE_KEY_TAG} BASE64` line, as `netrig keygen` writes)"
            ))),
        }
    }

    fn sign(&self, msg: &[u8]) -> Signature {
        Bytes(self.0.sign(msg).to_bytes())
    }
}

/// The welcome's `auth`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WelcomeAuth {
    /// The agent serves only clients with an authorized key.
    pub required: bool,
    /// Fresh for each session.
    pub nonce: Nonce,
    /// The agent's own key (`netrig serve --key`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_key: Option<PublicKey>,
}

/// The hello's `auth`. Fields an agent does not know are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloAuth {
    /// Fresh for each session.
    pub nonce: Nonce,
    /// The client's key (`--key`) and its signature of the transcript, or
    /// neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<PublicKey>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

/// A test request's `auth`: its place in the session and the client's
/// signature. Fields an agent does not know are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestAuth {
    pub counter: u64,
    pub signature: Signature,
}

/// The hash of everything both sides said in the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transcript([u8; 32]);

impl Transcript {
    pub fn new(
        version: u16,
        welcome: &WelcomeAuth,
        client_nonce: &Nonce,
        client_key: Option<&PublicKey>,
    ) -> Self {
        let mut h = Sha256::new();
        h.update(TRANSCRIPT_TAG);
        h.update(version.to_be_bytes());
        h.update([welcome.required as u8]);
        h.update(welcome.nonce.0);
        h.update(client_nonce.0);
        for key in [welcome.agent_key.as_ref(), client_key] {
            match key {
                Some(k) => {
                    h.update([1]);
                    h.update(k.0 .0);
                }
                None => h.update([0]),
            }
        }
        Transcript(h.finalize().into())
    }

    fn signed(&self, tag: &[u8]) -> Vec<u8> {
        [tag, &self.0].concat()
    }

    fn request(&self, counter: u64, spec: &TestSpec) -> Vec<u8> {
        self.counted(
            REQUEST_TAG,
            counter,
            &serde_json::to_vec(spec).expect("a spec serializes"),
        )
    }

    /// An `initiate`'s signed bytes: as a test request's, under its own tag, over the whole
    /// request (target, spec, start) as this code serializes it.
    fn initiate(&self, counter: u64, request: &crate::initiate::InitiateRequest) -> Vec<u8> {
        let json = serde_json::to_vec(request).expect("a request serializes");
        self.counted(INITIATE_TAG, counter, &json)
    }

    // Both ends serialize with the same code: the signed bytes are the
    // message's own serialization, whatever spacing the frame had.
    fn counted(&self, tag: &[u8], counter: u64, json: &[u8]) -> Vec<u8> {
        let mut m = self.signed(tag);
        m.extend_from_slice(&counter.to_be_bytes());
        m.extend_from_slice(json);
        m
    }
}

/// The agent's keys (`netrig serve --key`, `--authorized-keys`).
#[derive(Debug, Clone, Default)]
pub struct AgentAuth {
    pub key: Option<SecretKey>,
    /// `Some`: only these clients are served.
    pub authorized: Option<Vec<PublicKey>>,
}

/// An agent session's authentication, after the hello.
#[derive(Debug, Clone)]
pub struct AgentAuthSession {
    transcript: Transcript,
    /// The client's key, when it proved it holds one: its requests must be signed.
    pub client_key: Option<PublicKey>,
    next_counter: u64,
}

impl AgentAuth {
    pub fn required(&self) -> bool {
        self.authorized.is_some()
    }

    /// The welcome's `auth`, with a fresh nonce.
    pub fn welcome(&self) -> WelcomeAuth {
        WelcomeAuth {
            required: self.required(),
            nonce: Nonce::random(),
            agent_key: self.key.as_ref().map(SecretKey::public),
        }
    }

    /// Checks the hello's `auth` against the welcome this agent sent; on
    /// success, the agent's signature for `hello_accepted` and the session.
    pub fn on_hello(
        &self,
        version: u16,
        welcome: &WelcomeAuth,
        hello: Option<&HelloAuth>,
    ) -> Result<(Option<Signature>, AgentAuthSession), AuthError> {
        let Some(hello) = hello else {
            return Err(if self.required() {
                AuthError::Required
            } else {
                AuthError::Malformed("hello without auth".into())
            });
        };
        let transcript = Transcript::new(version, welcome, &hello.nonce, hello.client_key.as_ref());
        let client_key = match (&hello.client_key, &hello.signature) {
            (None, None) if self.required() => return Err(AuthError::Required),
            (None, None) => None,
            (Some(k), Some(sig)) => {
                if let Some(auth) = &self.authorized {
                    if !auth.contains(k) {
                        return Err(AuthError::UnknownKey(k.to_string()));
                    }
                }
                k.verify(
                    &transcript.signed(CLIENT_TAG),
                    sig,
                    "the client's signature of the handshake",
                )?;
                Some(*k)
            }
            _ => {
                return Err(AuthError::Malformed(
                    "hello has a client key without a signature, or a signature without a key".into(),
                ))
            }
        };
        let sig = self.key.as_ref().map(|k| k.sign(&transcript.signed(AGENT_TAG)));
        Ok((
            sig,
            AgentAuthSession {
                transcript,
                client_key,
                next_counter: 0,
            },
        ))
    }
}

impl AgentAuthSession {
    /// Checks a test request's `auth`: from a client with a key, every
    /// request must carry the next counter and a valid signature.
    pub fn check_request(&mut self, spec: &TestSpec, auth: Option<&RequestAuth>) -> Result<(), AuthError> {
        let signed = auth.map(|a| self.transcript.request(a.counter, spec));
        self.check_counted(auth, signed, "test_request")
    }

    /// Checks an `initiate`'s signature and counter as a test request's (one count for both).
    pub fn check_initiate(
        &mut self,
        request: &crate::initiate::InitiateRequest,
        auth: Option<&RequestAuth>,
    ) -> Result<(), AuthError> {
        let signed = auth.map(|a| self.transcript.initiate(a.counter, request));
        self.check_counted(auth, signed, "initiate")
    }

    fn check_counted(
        &mut self,
        auth: Option<&RequestAuth>,
        signed: Option<Vec<u8>>,
        what: &str,
    ) -> Result<(), AuthError> {
        let Some(key) = self.client_key else {
            return Ok(());
        };
        let (Some(auth), Some(signed)) = (auth, signed) else {
            return Err(AuthError::BadSignature(format!(
                "the {what} carries no signature, but the session is authenticated"
            )));
        };
        if auth.counter != self.next_counter {
            return Err(AuthError::Replay(format!(
                "{what} number {} of this session, expected {}",
                auth.counter, self.next_counter
            )));
        }
        key.verify(&signed, &auth.signature, &format!("the {what}'s signature"))?;
        self.next_counter += 1;
        Ok(())
    }
}

/// The client's keys (`--key`, `--agent-key`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientAuth {
    pub key: Option<SecretKey>,
    /// The agent's key to expect; `None`: any agent (or none).
    pub agent_key: Option<PublicKey>,
}

/// A client session's authentication, after its hello.
#[derive(Debug, Clone)]
pub struct ClientAuthSession {
    transcript: Transcript,
    key: Option<SecretKey>,
    agent_key: Option<PublicKey>,
    next_counter: u64,
}

impl ClientAuth {
    /// The hello's `auth` for the welcome's, with a fresh nonce; refuses an
    /// agent whose key is not the expected one before saying anything.
    pub fn hello(
        &self,
        version: u16,
        welcome: &WelcomeAuth,
    ) -> Result<(HelloAuth, ClientAuthSession), AuthError> {
        if let Some(want) = &self.agent_key {
            match &welcome.agent_key {
                None => {
                    return Err(AuthError::AgentKey(format!(
                        "the agent has no key (its --key), but --agent-key expects {want}"
                    )))
                }
                Some(k) if k != want => {
                    return Err(AuthError::AgentKey(format!(
                        "the agent presents {k}, but --agent-key expects {want}"
                    )))
                }
                Some(_) => {}
            }
        }
        if welcome.required && self.key.is_none() {
            return Err(AuthError::Required);
        }
        let nonce = Nonce::random();
        let client_key = self.key.as_ref().map(SecretKey::public);
        let transcript = Transcript::new(version, welcome, &nonce, client_key.as_ref());
        let signature = self.key.as_ref().map(|k| k.sign(&transcript.signed(CLIENT_TAG)));
        Ok((
            HelloAuth {
                nonce,
                client_key,
                signature,
            },
            ClientAuthSession {
                transcript,
                key: self.key.clone(),
                agent_key: self.agent_key.or(welcome.agent_key),
                next_counter: 0,
            },
        ))
    }
}

impl ClientAuthSession {
    /// Checks `hello_accepted`'s signature: required when an agent key is
    /// expected, verified whenever the agent has a key.
    pub fn check_accepted(&self, signature: Option<&Signature>, expected: bool) -> Result<(), AuthError> {
        match (self.agent_key, signature) {
            (Some(k), Some(sig)) => k.verify(
                &self.transcript.signed(AGENT_TAG),
                sig,
                "the agent's signature of the handshake",
            ),
            (Some(k), None) if expected => Err(AuthError::AgentKey(format!(
                "the agent did not prove it holds {k} (no signature)"
            ))),
            (Some(k), None) => Err(AuthError::BadSignature(format!(
                "the agent presented {k} but did not sign the handshake"
            ))),
            (None, Some(_)) => Err(AuthError::Malformed(
                "the agent signed the handshake without presenting a key".into(),
            )),
            (None, None) => Ok(()),
        }
    }

    /// The next test request's `auth`, when this client has a key.
    pub fn sign_request(&mut self, spec: &TestSpec) -> Option<RequestAuth> {
        let key = self.key.as_ref()?;
        let counter = self.next_counter;
        self.next_counter += 1;
        Some(RequestAuth {
            counter,
            signature: key.sign(&self.transcript.request(counter, spec)),
        })
    }

    /// An `initiate`'s `auth`, counted with the test requests.
    pub fn sign_initiate(&mut self, request: &crate::initiate::InitiateRequest) -> Option<RequestAuth> {
        let key = self.key.as_ref()?;
        let counter = self.next_counter;
        self.next_counter += 1;
        Some(RequestAuth {
            counter,
            signature: key.sign(&self.transcript.initiate(counter, request)),
        })
    }

    /// The agent's key, when it presented one (then proved by its signature of the handshake,
    /// [`Self::check_accepted`]).
    pub fn agent_key(&self) -> Option<PublicKey> {
        self.agent_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{KindSpec, Limit, TcpStreamSpec};

    fn spec(flows: u32) -> TestSpec {
        TestSpec {
            flows,
            ..TestSpec::new(
                KindSpec::TcpStream(TcpStreamSpec::default()),
                Limit::Duration { seconds: 1.0 },
            )
        }
    }

    struct Ends {
        agent: AgentAuth,
        client: ClientAuth,
    }

    fn keyed() -> (Ends, SecretKey, SecretKey) {
        let (ak, ck) = (SecretKey::generate(), SecretKey::generate());
        let ends = Ends {
            agent: AgentAuth {
                key: Some(ak.clone()),
                authorized: Some(vec![ck.public()]),
            },
            client: ClientAuth {
                key: Some(ck.clone()),
                agent_key: Some(ak.public()),
            },
        };
        (ends, ak, ck)
    }

    type Handshake = Result<(AgentAuthSession, ClientAuthSession), AuthError>;

    fn handshake(e: &Ends) -> Handshake {
        let w = e.agent.welcome();
        let (hello, cs) = e.client.hello(4, &w)?;
        let (sig, s) = e.agent.on_hello(4, &w, Some(&hello))?;
        cs.check_accepted(sig.as_ref(), e.client.agent_key.is_some())?;
        Ok((s, cs))
    }

    #[test]
    fn mutual_handshake_and_signed_requests() {
        let (e, _, ck) = keyed();
        let (mut agent, mut client) = handshake(&e).unwrap();
        assert_eq!(agent.client_key, Some(ck.public()));
        for n in 1..4 {
            let s = spec(n);
            let a = client.sign_request(&s).unwrap();
            assert_eq!(a.counter, u64::from(n - 1));
            agent.check_request(&s, Some(&a)).unwrap();
        }
    }

    #[test]
    fn tampered_spec_is_rejected() {
        let (e, _, _) = keyed();
        let (mut agent, mut client) = handshake(&e).unwrap();
        let a = client.sign_request(&spec(1)).unwrap();
        let err = agent.check_request(&spec(2), Some(&a)).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature(_)), "{err}");
        assert!(err.to_string().starts_with("bad signature"), "{err}");
        let err = agent.check_request(&spec(1), None).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature(_)), "{err}");
    }

    #[test]
    fn replayed_request_is_rejected() {
        let (e, _, _) = keyed();
        let (mut agent, mut client) = handshake(&e).unwrap();
        let s = spec(1);
        let a = client.sign_request(&s).unwrap();
        agent.check_request(&s, Some(&a)).unwrap();
        let err = agent.check_request(&s, Some(&a)).unwrap_err();
        assert!(matches!(err, AuthError::Replay(_)), "{err}");
        assert!(err.to_string().starts_with("replay"), "{err}");
        // Another session's request (the same counter) does not verify here.
        let (mut agent2, _) = handshake(&e).unwrap();
        let err = agent2.check_request(&s, Some(&a)).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature(_)), "{err}");
    }

    #[test]
    fn wrong_agent_key_is_refused() {
        let (mut e, _, _) = keyed();
        e.client.agent_key = Some(SecretKey::generate().public());
        let err = handshake(&e).unwrap_err();
        assert!(matches!(err, AuthError::AgentKey(_)), "{err}");
        // An agent without a key, when one is expected.
        let (mut e, _, _) = keyed();
        e.agent.key = None;
        assert!(matches!(handshake(&e), Err(AuthError::AgentKey(_))));
        // An impostor presenting the right public key cannot sign for it.
        let (e, ak, _) = keyed();
        let w = e.agent.welcome();
        let (hello, cs) = e.client.hello(4, &w).unwrap();
        let impostor = AgentAuth {
            key: Some(SecretKey::generate()),
            ..e.agent.clone()
        };
        let (sig, _) = impostor.on_hello(4, &w, Some(&hello)).unwrap();
        assert_eq!(w.agent_key, Some(ak.public()));
        let err = cs.check_accepted(sig.as_ref(), true).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature(_)), "{err}");
    }

    #[test]
    fn wrong_or_missing_client_key_is_refused() {
        let (mut e, _, _) = keyed();
        e.client.key = Some(SecretKey::generate());
        let err = handshake(&e).unwrap_err();
        assert!(matches!(err, AuthError::UnknownKey(_)), "{err}");
        assert!(err.to_string().starts_with("unknown key"), "{err}");
        // The authorized key, signed by another.
        let (e, _, ck) = keyed();
        let w = e.agent.welcome();
        let (mut hello, _) = e.client.hello(4, &w).unwrap();
        let other = ClientAuth {
            key: Some(SecretKey::generate()),
            agent_key: None,
        };
        hello.signature = other.hello(4, &w).unwrap().0.signature;
        assert_eq!(hello.client_key, Some(ck.public()));
        let err = e.agent.on_hello(4, &w, Some(&hello)).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature(_)), "{err}");
        // A signature from another session (another agent nonce).
        let (hello, _) = e.client.hello(4, &w).unwrap();
        let err = e.agent.on_hello(4, &e.agent.welcome(), Some(&hello)).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature(_)), "{err}");
        // No key at all.
        let (mut e, _, _) = keyed();
        e.client.key = None;
        assert_eq!(handshake(&e).unwrap_err(), AuthError::Required);
        let w = e.agent.welcome();
        assert_eq!(e.agent.on_hello(4, &w, None).unwrap_err(), AuthError::Required);
    }

    #[test]
    fn unauthenticated_is_the_default() {
        let e = Ends {
            agent: AgentAuth::default(),
            client: ClientAuth::default(),
        };
        let (mut agent, mut client) = handshake(&e).unwrap();
        assert!(client.sign_request(&spec(1)).is_none());
        agent.check_request(&spec(1), None).unwrap();
    }

    #[test]
    fn key_files_round_trip() {
        let k = SecretKey::generate();
        let back = SecretKey::parse(&k.to_file_text()).unwrap();
        assert_eq!(back.public(), k.public());
        let line = format!("{} me@host", k.public());
        assert_eq!(PublicKey::parse(&line).unwrap(), k.public());
        assert_eq!(PublicKey::parse(&k.public().0.to_string()).unwrap(), k.public());
        assert!(PublicKey::parse(&k.to_file_text()).is_err());
        assert!(SecretKey::parse(&line).is_err());
        let file = format!("# ops\n\n{line}\n{} other\n", SecretKey::generate().public());
        assert_eq!(parse_authorized_keys(&file).unwrap().len(), 2);
        let err = parse_authorized_keys("# x\nssh-ed25519 AAAA x\n").unwrap_err();
        assert!(err.starts_with("line 2"), "{err}");
    }
}
