use thiserror::Error;

/// Anything a peer can get wrong. A peer may be an attacker: every malformed
/// input ends up here, never in a panic.
#[derive(Debug, Error)]
pub enum ProtoError {
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("not a netrig peer (first bytes {0:02x?})")]
    BadMagic([u8; 4]),
    /// A known other tool's greeting (an iperf3 client, an HTTP client).
    #[error("{0}, not a netrig peer")]
    Foreign(&'static str),
    #[error("unexpected message {got} while {state}")]
    Unexpected { got: &'static str, state: &'static str },
    #[error("{0}")]
    Violation(String),
    #[error("timed out {0}")]
    Timeout(String),
}
