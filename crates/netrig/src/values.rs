//! Value parsers that more than one command's options share (`serve` and `http-serve` read
//! `--bind` alike).

use netrig_engine::addr::ScopedIp;

/// `serve --bind`: an address of this host, with its scope when link-local.
pub fn parse_listen_ip(text: &str) -> Result<ScopedIp, String> {
    netrig_engine::addr::parse_ip(text)?.ok_or_else(|| {
        format!("{text:?} is not an IP address (give one of this host's addresses, not a name)")
    })
}
