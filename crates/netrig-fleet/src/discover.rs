//! LEAD'S STUB, replaced by the helper's at merge.
pub struct Found {
    pub name: String,
    pub addr: std::net::SocketAddr,
}
pub fn server_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse().map_err(|e| format!("{e}"))
}
pub fn discover(
    _name: &str,
    _port: u16,
    _server: Option<std::net::SocketAddr>,
    _t: std::time::Duration,
) -> Result<Vec<Found>, String> {
    Err("not yet".into())
}
