//! Overload from inside a lab (issue #39, the IA64 study's overload half): netrig's own SYN
//! flood generator ([`flood`]: raw sockets, sources from the lab's range, bounded rate and
//! length) and half-closed connections ([`halfclose`]), each with a watch of the target host's
//! kernel ([`watch`]: counters and sockets by state, read in its namespace). Both run only inside
//! a lab host towards another host of the same lab ([`scope`], the refusal rule). `netrig lab
//! flood` and `netrig lab half-close` are their command lines (docs/studies/ia64-overload.md).

pub mod flood;
pub mod halfclose;
pub mod packet;
pub mod scope;
pub mod watch;

use std::sync::atomic::AtomicBool;

/// Runs `f` on a thread of its own that entered the namespace of `host` of lab `which` (name or
/// id) first.
pub fn in_host<T: Send + 'static>(
    which: &str,
    host: &str,
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let s = crate::build::list()
        .into_iter()
        .find(|s| s.name == which || s.id == which)
        .ok_or_else(|| format!("no lab named {which:?} (netrig lab status lists them)"))?;
    let h = s.hosts.get(host).ok_or_else(|| {
        format!(
            "lab {}: no host {host:?} (hosts: {})",
            s.name,
            s.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    let ns = h.ns.clone();
    std::thread::spawn(move || {
        watch::enter(&ns)?;
        f()
    })
    .join()
    .map_err(|_| "the generator's thread panicked".to_string())?
}

/// A flood from `host` of lab `which`, with the target host watched over it (from before the
/// flood to `settle` after it).
pub fn flood_from(
    which: &str,
    host: &str,
    o: &flood::Options,
    after: std::time::Duration,
    settle: std::time::Duration,
    stop: &'static AtomicBool,
) -> Result<(flood::Report, Option<watch::View>), String> {
    flood::check(o)?;
    let o2 = o.clone();
    // The watch needs the target's namespace: the scope the flood itself checks names it.
    let target = crate::build::list()
        .into_iter()
        .find(|s| s.name == which || s.id == which)
        .and_then(|s| {
            s.hosts.iter().find_map(|(name, h)| {
                h.addrs
                    .iter()
                    .any(|a| a.split('/').next().and_then(|x| x.parse().ok()) == Some(o.to.ip()))
                    .then(|| (name.clone(), h.ns.clone()))
            })
        });
    let bound = after + o.length + settle + std::time::Duration::from_secs(5);
    let w = target
        .as_ref()
        .map(|(name, ns)| watch::Watch::start(name, ns, o.to.port(), None, bound, false));
    let r = in_host(which, host, move || {
        std::thread::sleep(after);
        flood::run(&o2, stop)
    });
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            if let Some(w) = w {
                let _ = w.finish();
            }
            return Err(e);
        }
    };
    std::thread::sleep(settle);
    let view = match w {
        Some(w) => Some(w.finish()?),
        None => None,
    };
    Ok((r, view))
}
