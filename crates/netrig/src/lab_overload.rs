//! `netrig lab flood` and `netrig lab half-close`: thin glue over netrig_lab::overload
//! (docs/studies/ia64-overload.md).

use anyhow::{anyhow, Result};
use clap::{Args, ValueEnum};
use netrig_kinds::units::parse_seconds;
use netrig_lab::overload::{flood as fl, halfclose as hc, watch::View};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set on Ctrl-C (the lab's interrupt), read by the generators between packets.
static STOP: AtomicBool = AtomicBool::new(false);

fn watch_interrupt() {
    std::thread::spawn(|| loop {
        if netrig_lab::interrupted() {
            STOP.store(true, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(50));
    });
}

#[derive(Debug, Args)]
pub struct FloodArgs {
    /// The lab (name or id).
    pub name: String,
    /// The attacking host (the flood runs in its namespace).
    pub host: String,
    /// The target: ADDR:PORT of another host of the lab, or that host's name (its agent's port
    /// unless HOST:PORT).
    #[arg(long, value_name = "ADDR:PORT|HOST[:PORT]")]
    pub to: String,
    /// With a host name in --to: its IPv6 address.
    #[arg(short = '6', long)]
    pub ipv6: bool,
    /// SYNs per second (1 to 200000).
    #[arg(long, default_value_t = 20_000, value_name = "PPS")]
    pub rate: u32,
    /// Seconds of flood (at most 60).
    #[arg(short = 'l', long, default_value = "5", value_parser = parse_seconds, value_name = "SECONDS")]
    pub length: f64,
    /// Start after this many seconds (at most 60), e.g. once a probe beside it is running.
    #[arg(long, default_value = "0", value_parser = parse_seconds, value_name = "SECONDS")]
    pub after: f64,
    /// Keep watching the target this long after the flood (at most 60 s).
    #[arg(long, default_value = "0.5", value_parser = parse_seconds, value_name = "SECONDS")]
    pub settle: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum HowArg {
    /// Send the request, shut the write half, hold the connection unread.
    Shutdown,
    /// Send the request, read until the server closes, go away without a FIN or RST.
    Vanish,
}

#[derive(Debug, Args)]
pub struct HalfCloseArgs {
    /// The lab (name or id).
    pub name: String,
    /// The client host (the connections come from its namespace).
    pub host: String,
    /// The server: ADDR:PORT of another host of the lab, or HOST[:PORT] (its agent's port).
    #[arg(long, value_name = "ADDR:PORT|HOST[:PORT]")]
    pub to: String,
    /// With a host name in --to: its IPv6 address.
    #[arg(short = '6', long)]
    pub ipv6: bool,
    /// Connections (1 to 20000).
    #[arg(short = 'n', long, default_value_t = 200)]
    pub connections: u32,
    /// How the clients close and go away.
    #[arg(long, value_enum, default_value = "vanish")]
    pub how: HowArg,
    /// The request each sends (\r\n escapes allowed; default an HTTP/1.0 GET /).
    #[arg(long)]
    pub request: Option<String>,
    /// Watch the server's sockets at most this long after the clients went away (at most 600).
    #[arg(long, default_value = "90", value_parser = parse_seconds, value_name = "SECONDS")]
    pub watch: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--to`: an address with a port, or a lab host's name (its agent's port unless given).
fn target(lab: &str, to: &str, v6: bool) -> Result<SocketAddr> {
    if let Ok(a) = to.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = match to.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (
            h,
            Some(p.parse::<u16>().map_err(|_| anyhow!("--to {to}: bad port"))?),
        ),
        _ => (to, None),
    };
    let s = netrig_lab::list()
        .into_iter()
        .find(|s| s.name == lab || s.id == lab)
        .ok_or_else(|| anyhow!("no lab named {lab:?} (netrig lab status lists them)"))?;
    let h = s.hosts.get(host).ok_or_else(|| {
        anyhow!(
            "--to {to}: neither ADDR:PORT nor a host of lab {} (hosts: {})",
            s.name,
            s.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    let ip = h
        .addrs
        .iter()
        .filter_map(|a| a.split('/').next()?.parse::<std::net::IpAddr>().ok())
        .find(|a| a.is_ipv6() == v6)
        .ok_or_else(|| {
            anyhow!(
                "--to {to}: host {host} has no {} address",
                if v6 { "IPv6" } else { "IPv4" }
            )
        })?;
    let port = match (port, &h.agent) {
        (Some(p), _) => p,
        (None, Some(a)) => a.port,
        (None, None) => return Err(anyhow!("--to {to}: host {host} runs no agent; give HOST:PORT")),
    };
    Ok(SocketAddr::new(ip, port))
}

fn secs(option: &str, v: f64, max: f64) -> Result<Duration> {
    if !(0.0..=max).contains(&v) {
        return Err(crate::Usage(format!("{option} {v}: 0 to {max} s (netrig's limit)")).into());
    }
    Ok(Duration::from_secs_f64(v))
}

fn counters_line(v: &View) -> String {
    if let Some(w) = &v.counters_withheld {
        return format!("counters withheld: {w}");
    }
    v.counters
        .iter()
        .map(|(k, x)| format!("{k} {x:+}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn flood(a: FloodArgs) -> Result<()> {
    watch_interrupt();
    let o = fl::Options {
        to: target(&a.name, &a.to, a.ipv6)?,
        rate_pps: a.rate,
        length: Duration::from_secs_f64(a.length.max(0.0)),
    };
    fl::check(&o).map_err(crate::Usage)?;
    let after = secs("--after", a.after, 60.0)?;
    let settle = secs("--settle", a.settle, 60.0)?;
    let (r, view) = netrig_lab::overload::flood_from(&a.name, &a.host, &o, after, settle, &STOP)
        .map_err(|e| anyhow!(e))?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "flood": r, "target_host": view }))?
        );
        return Ok(());
    }
    println!(
        "flood {} -> {} (host {}, lab {}): {} SYNs in {:.2} s = {:.0} packets/s (asked {}/s for {} s), sources random in {}; {} send errors{}",
        r.host,
        r.target,
        r.target_host,
        r.lab,
        r.sent,
        r.window_s,
        r.rate_pps,
        r.rate_asked_pps,
        r.length_asked_s,
        r.sources.join(", "),
        r.send_errors,
        r.first_error.as_deref().map(|e| format!(" (first: {e})")).unwrap_or_default()
    );
    if let Some(v) = view {
        println!(
            "{} over {:.2} s (from before the flood to {:.1} s after), kernel counter deltas: {}",
            v.host,
            v.window_s,
            a.settle,
            counters_line(&v)
        );
        match &v.sockets_withheld {
            Some(w) => println!("{} sockets on port {}: withheld ({w})", v.host, v.port),
            None => println!(
                "{} sockets on port {} (every {} ms, {} samples): SYN_RECV peak {}, ESTABLISHED peak {}",
                v.host,
                v.port,
                netrig_lab::overload::watch::PERIOD.as_millis(),
                v.samples.len(),
                v.peak.syn_recv,
                v.peak.established
            ),
        }
    }
    Ok(())
}

/// `\r`, `\n`, `\t` and `\\` in a request given on the command line.
fn unescape(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            continue;
        }
        match it.next() {
            Some('r') => out.push(b'\r'),
            Some('n') => out.push(b'\n'),
            Some('t') => out.push(b'\t'),
            Some('\\') => out.push(b'\\'),
            Some(o) => {
                out.push(b'\\');
                let mut b = [0u8; 4];
                out.extend_from_slice(o.encode_utf8(&mut b).as_bytes());
            }
            None => out.push(b'\\'),
        }
    }
    out
}

pub fn half_close(a: HalfCloseArgs) -> Result<()> {
    watch_interrupt();
    let o = hc::Options {
        to: target(&a.name, &a.to, a.ipv6)?,
        connections: a.connections,
        how: match a.how {
            HowArg::Shutdown => hc::How::Shutdown,
            HowArg::Vanish => hc::How::Vanish,
        },
        request: a
            .request
            .as_deref()
            .map(unescape)
            .unwrap_or_else(|| hc::DEFAULT_REQUEST.as_bytes().to_vec()),
        watch: Duration::from_secs_f64(a.watch.max(0.0)),
    };
    hc::check(&o).map_err(crate::Usage)?;
    let r = netrig_lab::overload::in_host(&a.name, &a.host, move || hc::run(&o, &STOP))
        .map_err(|e| anyhow!(e))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "half-close {} -> {} (host {}, lab {}), {:?}: {} of {} connections opened ({} failed to connect, {} cut short by the server{}){}; all gone away {:.2} s into the watch",
        r.host,
        r.target,
        r.target_host,
        r.lab,
        r.how,
        r.opened,
        r.connections_asked,
        r.connect_failures,
        r.request_failures,
        r.first_error.as_deref().map(|e| format!(", first: {e}")).unwrap_or_default(),
        r.server_closed_first
            .map(|n| format!("; the server had closed {n} before they went"))
            .unwrap_or_default(),
        r.away_at_s
    );
    let v = &r.server;
    match &v.sockets_withheld {
        Some(w) => println!("{}'s sockets: withheld ({w})", v.host),
        None => println!(
            "{} sockets from {} on port {} (every {} ms, {} samples over {:.2} s): peak FIN_WAIT2 {}, CLOSE_WAIT {}, LAST_ACK {}, ESTABLISHED {}",
            v.host,
            v.peer.map(|p| p.to_string()).unwrap_or_default(),
            v.port,
            netrig_lab::overload::watch::PERIOD.as_millis(),
            v.samples.len(),
            v.window_s,
            v.peak.fin_wait2,
            v.peak.close_wait,
            v.peak.last_ack,
            v.peak.established
        ),
    }
    match r.gone_after_s {
        Some(g) => println!(
            "gone {g:.2} s after the clients went away (the server's tcp_fin_timeout: {})",
            r.server_fin_timeout_s.map_or("unread".into(), |t| format!("{t} s"))
        ),
        None => println!(
            "{} still open when the watch ended ({:.0} s after the clients went away; the server's tcp_fin_timeout: {})",
            r.left_at_end,
            a.watch,
            r.server_fin_timeout_s.map_or("unread".into(), |t| format!("{t} s"))
        ),
    }
    Ok(())
}
