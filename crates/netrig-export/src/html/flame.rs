//! Flame graphs of a profile's folded stacks (`--profile`, docs/PROFILE.md), drawn by inferno
//! and placed inline in the HTML report: one per end of a run, and a differential one between
//! two arms of an experiment.
//!
//! The stacks may come from another host's agent over the wire, so nothing in them is trusted:
//! at most [`MAX_STACKS`] stacks (the heaviest), [`MAX_FRAMES`] frames a stack and
//! [`MAX_NAME`] characters a name, [`MAX_CELLS`] frames in all; control characters are
//! replaced, and every name is escaped by inferno's XML writer. What was cut is said in the
//! graph's subtitle.
//!
//! inferno writes a standalone SVG file with a script for search and zoom that looks its
//! elements up by id in the whole document, and a style sheet that would apply to the whole
//! page. Inline, with two graphs and the report's plots on one page, neither works, so the SVG
//! is drawn without the script and trimmed of its prelude (the XML declaration, the style,
//! the script, the script's buttons); its ids become classes, which the report's style sheet
//! ([`STYLE`]) dresses for a light and a dark page. A frame's count shows in its tooltip.

use super::esc;
use inferno::flamegraph::{self, color::PaletteMap, Options};
use netrig_document::result::profile::{EndProfile, FoldedStack, ProfileResult, Profiled};
use netrig_profile::groups::{frame_group, Group};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Stacks drawn at most (the heaviest): the sampler keeps 2,000 in a result.
pub const MAX_STACKS: usize = 2_000;
/// Frames of one stack at most (the sampler keeps 64 and the process name); deeper ones are
/// replaced by one frame that says how many were cut.
pub const MAX_FRAMES: usize = 80;
/// Characters of a frame's name at most; a longer one is cut and ends in "…".
pub const MAX_NAME: usize = 160;
/// Frames over all the stacks drawn at most (the SVG's size grows with them): lighter stacks
/// past it are left out, and the title says how many were shown.
pub const MAX_CELLS: usize = 20_000;
/// One stack's samples at most (2^40: 35 years of 1,000 CPUs at 999 Hz): a larger count
/// from the wire is cut to it, so that sums and differences cannot overflow.
pub const MAX_COUNT: u64 = 1 << 40;
/// Characters of a withheld reason or an arm's name shown at most.
const MAX_WORDS: usize = 500;
/// The graph's width in SVG units; the page scales it to fit.
const WIDTH: usize = 1200;

/// The report's style for the graphs (inferno's own, which would style the whole page, is
/// left out): text in the page's colours, frames' names dark on their light fills.
pub const STYLE: &str = r#"
svg.flamegraph text { font: 12px ui-monospace, monospace; fill: #000; }
svg.flamegraph .fg-title { text-anchor: middle; font-size: 15px; fill: var(--fg); }
svg.flamegraph .fg-subtitle { text-anchor: middle; fill: var(--muted); }
svg.flamegraph.differential .fg-frames > g > rect { stroke: var(--line); stroke-width: .5; }
svg.flamegraph .fg-frames > g:hover > rect { stroke: var(--fg); stroke-width: 1; }
.flame-legend span.swatch { display: inline-block; width: .9em; height: .9em; vertical-align: -.1em; margin: 0 .25em 0 .8em; border: 1px solid var(--line); }
"#;

/// A flame graph ready to be placed in a page.
#[derive(Debug, Clone)]
pub struct Flame {
    /// What the graph counts, and how much of it is shown (the SVG's title).
    pub title: String,
    /// How to read the widths and what was cut (the SVG's subtitle).
    pub note: String,
    /// The SVG element, without XML prelude, script or ids.
    pub svg: String,
    /// The groups whose colour some frame has, in report order (empty for a differential
    /// graph, coloured by its change).
    pub groups: Vec<Option<Group>>,
}

/// One arm of an experiment for [`differential`]: its folded stacks (summed over its runs,
/// `comm;root;...;leaf` with samples) and every sample the arm took, of which the stacks are
/// a part (the arms are compared as shares of these).
#[derive(Debug, Clone, Copy)]
pub struct ArmStacks<'a> {
    pub name: &'a str,
    pub folded: &'a [FoldedStack],
    pub samples: u64,
}

/// A group's fill (light, so that the frames' dark names read on them in either mode); `None`
/// is a frame no group's patterns name (a process name, an entry stub, user space).
fn group_colour(g: Option<Group>) -> (u8, u8, u8) {
    match g {
        Some(Group::Socket) => (0xf2, 0xb8, 0x72),
        Some(Group::Tcp) => (0xf2, 0x8e, 0x6b),
        Some(Group::Udp) => (0xf5, 0xa3, 0xc7),
        Some(Group::Ip) => (0xe9, 0xd6, 0x6b),
        Some(Group::Netfilter) => (0xc3, 0xa6, 0xff),
        Some(Group::Conntrack) => (0x9f, 0xa8, 0xf0),
        Some(Group::Qdisc) => (0x8f, 0xd3, 0xc1),
        Some(Group::Device) => (0x9c, 0xc9, 0xf5),
        Some(Group::MemoryCopy) => (0xff, 0xa0, 0xa0),
        Some(Group::Scheduler) => (0xb5, 0xd9, 0x9c),
        Some(Group::Idle) => (0xdd, 0xdd, 0xdd),
        Some(Group::Other) | None => (0xe6, 0xcf, 0xa8),
    }
}

fn group_label(g: Option<Group>) -> &'static str {
    g.map_or("no group (process, entry, user space)", Group::name)
}

/// `n` with thousands separators.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).unwrap_or_default())
        .collect();
    groups.join(",")
}

/// At most `max` characters of `s`, "…" where cut; the second value says whether it was.
fn cut(s: &str, max: usize) -> (String, bool) {
    match s.char_indices().nth(max) {
        None => (s.to_string(), false),
        Some((i, _)) => (format!("{}…", &s[..i]), true),
    }
}

/// A frame's name as drawn: control characters replaced (they are not XML), spaces made
/// no-break (inferno reads a line's count after its last space: a name ending in " 12" must
/// not read as a count), at most [`MAX_NAME`] characters; the second value says whether it
/// was cut.
fn clean_name(name: &str) -> (String, bool) {
    let (short, cut_) = cut(name, MAX_NAME);
    let clean: String = short
        .chars()
        .map(|c| match c {
            ' ' => '\u{a0}',
            c if c.is_control() => '\u{fffd}',
            c => c,
        })
        .collect();
    if clean.is_empty() {
        ("[empty]".into(), cut_)
    } else {
        (clean, cut_)
    }
}

/// The stacks drawn, cleaned, with what was cut.
#[derive(Debug, Default)]
struct Prepared {
    /// Cleaned stack → samples (equal stacks after cleaning are summed).
    stacks: BTreeMap<String, u64>,
    /// Cleaned name → its group's colour.
    colours: BTreeMap<String, Option<Group>>,
    /// Input stacks drawn, and their samples.
    shown: usize,
    shown_samples: u64,
    /// Stacks with a name cut, stacks cut in depth, counts cut to [`MAX_COUNT`].
    names_cut: usize,
    deep_cut: usize,
    counts_cut: usize,
}

/// The heaviest stacks of `folded`, within the bounds.
fn prepare(folded: &[FoldedStack]) -> Prepared {
    let mut order: Vec<&FoldedStack> = folded.iter().filter(|s| s.samples > 0).collect();
    order.sort_by_key(|s| std::cmp::Reverse(s.samples));
    let mut p = Prepared::default();
    let mut cells = 0;
    for s in order.into_iter().take(MAX_STACKS) {
        // Counted, not split, past the bound: a stack from the wire may hold any number.
        let total = s.stack.bytes().filter(|&b| b == b';').count() + 1;
        let frames: Vec<&str> = s.stack.split(';').take(MAX_FRAMES).collect();
        let depth = frames.len();
        if cells + depth > MAX_CELLS {
            break;
        }
        cells += depth;
        // Past the bound, the last frame kept stands for the cut ones.
        let keep = if total > depth { depth - 1 } else { depth };
        let mut names = Vec::with_capacity(depth);
        let mut name_cut = false;
        for f in &frames[..keep] {
            let (name, was_cut) = clean_name(f);
            name_cut |= was_cut;
            p.colours.entry(name.clone()).or_insert_with(|| frame_group(f));
            names.push(name);
        }
        if keep < depth {
            let marker = format!("[{} deeper frames cut]", total - keep);
            p.colours.entry(marker.clone()).or_insert(None);
            names.push(marker);
            p.deep_cut += 1;
        }
        p.names_cut += usize::from(name_cut);
        p.counts_cut += usize::from(s.samples > MAX_COUNT);
        let samples = s.samples.min(MAX_COUNT);
        *p.stacks.entry(names.join(";")).or_default() += samples;
        p.shown += 1;
        p.shown_samples += samples;
    }
    p
}

/// What was cut, in words, for the subtitle.
fn cuts(p: &Prepared) -> String {
    let mut w = String::new();
    if p.names_cut > 0 {
        let _ = write!(
            w,
            "; names cut to {MAX_NAME} characters in {} stacks",
            p.names_cut
        );
    }
    if p.deep_cut > 0 {
        let _ = write!(w, "; {} stacks cut to {MAX_FRAMES} frames", p.deep_cut);
    }
    if p.counts_cut > 0 {
        let _ = write!(w, "; {} counts cut to {}", p.counts_cut, thousands(MAX_COUNT));
    }
    w
}

/// inferno's options for an inline graph.
fn options<'a>(title: &str, note: &str, palette: Option<&'a mut PaletteMap>) -> Options<'a> {
    let mut o = Options::default();
    o.title = title.to_string();
    o.subtitle = Some(note.to_string());
    o.image_width = Some(WIDTH);
    o.no_javascript = true;
    o.deterministic = true;
    o.count_name = "samples".into();
    // Frames narrower than 0.1 % of the width (about a unit of 1,200) are not drawn: they
    // could not be seen, and a hostile profile's thousands of them would only swell the page.
    o.min_width = 0.1;
    o.palette_map = palette;
    o
}

/// Draws `lines` (folded, one or two counts) with `opt` and makes the SVG fit to inline;
/// `class` is the SVG's ("flamegraph", and "differential" for one: its white frames, no
/// change, get an outline to be seen on a light page).
fn draw(opt: &mut Options<'_>, lines: &[String], class: &str) -> Result<String, String> {
    let mut out = Vec::new();
    flamegraph::from_lines(opt, lines.iter().map(String::as_str), &mut out)
        .map_err(|e| format!("the flame graph could not be drawn: {e}"))?;
    let svg = String::from_utf8(out).map_err(|e| format!("the flame graph is not UTF-8: {e}"))?;
    inline(&svg, &opt.title, class)
}

/// The element starting with `open` up to the end of the first `close` after it, removed.
fn remove_element(svg: &mut String, open: &str, close: &str) {
    if let Some(start) = svg.find(open) {
        if let Some(len) = svg[start..].find(close) {
            svg.replace_range(start..start + len + close.len(), "");
        }
    }
}

/// The value of attribute `name` in the tag `tag`.
fn attribute<'s>(tag: &'s str, name: &str) -> Option<&'s str> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    Some(&tag[start..start + tag[start..].find('"')?])
}

/// inferno's standalone SVG as an element to place in a page: the XML declaration, doctype,
/// comments, style, script, background gradient and the script's texts (details, zoom,
/// search) removed, its ids made classes, its root tag remade with a label for readers.
/// Names inside are escaped by inferno's writer (their quotes too), so no name can be taken
/// for the tags or attributes looked for here.
fn inline(svg: &str, title: &str, class: &str) -> Result<String, String> {
    let bad = || "the flame graph's SVG was not as expected".to_string();
    let start = svg.find("<svg ").ok_or_else(bad)?;
    let head_end = start + svg[start..].find('>').ok_or_else(bad)?;
    let head = &svg[start..head_end];
    let (w, h, vb) = (
        attribute(head, "width").ok_or_else(bad)?,
        attribute(head, "height").ok_or_else(bad)?,
        attribute(head, "viewBox").ok_or_else(bad)?,
    );
    let mut body = svg[head_end + 1..].to_string();
    for (open, close) in [
        ("<!--", "-->"),
        ("<!--", "-->"),
        ("<defs>", "</defs>"),
        ("<style", "</style>"),
        ("<script", "</script>"),
        ("<text id=\"details\"", "</text>"),
        ("<text id=\"unzoom\"", "</text>"),
        ("<text id=\"search\"", "</text>"),
        ("<text id=\"matched\"", "</text>"),
    ] {
        remove_element(&mut body, open, close);
    }
    let body = body
        .replacen("fill=\"url(#background)\"", "fill=\"none\"", 1)
        .replacen("<text id=\"title\"", "<text class=\"fg-title\"", 1)
        .replacen("<text id=\"subtitle\"", "<text class=\"fg-subtitle\"", 1)
        .replacen("<svg id=\"frames\"", "<svg class=\"fg-frames\"", 1);
    if body.contains(" id=\"") || body.contains("<script") || body.contains("<style") {
        return Err(bad());
    }
    Ok(format!(
        "<svg class=\"{class}\" width=\"{w}\" height=\"{h}\" viewBox=\"{vb}\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"{}\">{}",
        esc(title),
        body.trim()
    ))
}

/// The flame graph of one end's profile; `end` names it ("local (client)").
pub fn end_flame(end: &str, p: &Profiled) -> Result<Flame, String> {
    let prep = prepare(&p.folded);
    if prep.stacks.is_empty() {
        return Err("no folded stack has a sample".into());
    }
    let title = format!(
        "{end}: {} samples of every CPU at {} Hz over {:.2} s (the measured window); {} of {} stacks shown",
        thousands(p.samples),
        p.frequency_hz,
        p.window_s,
        thousands(prep.shown as u64),
        thousands(p.folded_total.max(p.folded.len() as u64)),
    );
    let note = format!(
        "widths: samples of the stacks shown ({} of {}); colours: the frame's group; hover a frame for its samples{}",
        thousands(prep.shown_samples),
        thousands(p.samples),
        cuts(&prep)
    );
    let mut palette = PaletteMap::default();
    for (name, g) in &prep.colours {
        let (r, gr, b) = group_colour(*g);
        palette.insert(name, inferno::flamegraph::color::Color { r, g: gr, b });
    }
    // The "all" frame at the root.
    palette.insert(
        "",
        inferno::flamegraph::color::Color {
            r: 0xdd,
            g: 0xdd,
            b: 0xdd,
        },
    );
    let lines: Vec<String> = prep.stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let svg = draw(
        &mut options(&title, &note, Some(&mut palette)),
        &lines,
        "flamegraph",
    )?;
    let mut groups: Vec<Option<Group>> = prep.colours.values().copied().collect();
    groups.sort();
    groups.dedup();
    Ok(Flame {
        title,
        note,
        svg,
        groups,
    })
}

/// A differential flame graph of arm `b` against arm `a`: the frames are `b`'s stacks, as wide
/// as their samples, each stack's leaf coloured by how the stack's share of its arm's samples
/// changed from `a` to `b` (inferno's differential folding, `a`'s counts first scaled to `b`'s
/// samples): red where `b` spends a larger share there, blue a smaller, white the same (and
/// the frames beneath a leaf, as inferno draws them); the deeper the colour, the larger the
/// change against the largest one. A stack `a` has and `b` has not
/// is not drawn (it has no width in `b`); swap the arms to see it in blue. Errors when either
/// arm has no samples, in words for the report.
pub fn differential(a: &ArmStacks<'_>, b: &ArmStacks<'_>) -> Result<Flame, String> {
    let (an, bn) = (cut(a.name, MAX_WORDS).0, cut(b.name, MAX_WORDS).0);
    if a.samples == 0 || b.samples == 0 {
        return Err(format!(
            "no differential flame graph: arm {} has no samples",
            if a.samples == 0 { &an } else { &bn }
        ));
    }
    let (pa, pb) = (prepare(a.folded), prepare(b.folded));
    if pb.stacks.is_empty() {
        return Err(format!(
            "no differential flame graph: no stack of arm {bn} has a sample"
        ));
    }
    let scale = b.samples as f64 / a.samples as f64;
    let before: String = pa
        .stacks
        .iter()
        .map(|(s, n)| format!("{s} {}\n", ((*n as f64 * scale).round() as u64).min(MAX_COUNT)))
        .collect();
    let after: String = pb.stacks.iter().map(|(s, n)| format!("{s} {n}\n")).collect();
    let mut folded = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        before.as_bytes(),
        after.as_bytes(),
        &mut folded,
    )
    .map_err(|e| format!("no differential flame graph: {e}"))?;
    let lines: Vec<String> = String::from_utf8_lossy(&folded)
        .lines()
        .map(str::to_string)
        .collect();
    let title = format!(
        "{bn} against {an}: {} samples of {bn}, {} of {an}; their {} and {} heaviest stacks shown",
        thousands(b.samples),
        thousands(a.samples),
        thousands(pb.shown as u64),
        thousands(pa.shown as u64),
    );
    let mut cut_words = cuts(&pa);
    cut_words.push_str(&cuts(&pb));
    let note = format!(
        "widths: {bn}'s samples; red: a larger share of {bn}'s samples than of {an}'s, blue: smaller; hover a frame for the change{cut_words}"
    );
    let svg = draw(
        &mut options(&title, &note, None),
        &lines,
        "flamegraph differential",
    )?;
    Ok(Flame {
        title,
        note,
        svg,
        groups: Vec::new(),
    })
}

/// A graph as a figure of the page, with its colours' legend.
pub fn figure(id: &str, f: &Flame) -> String {
    let mut o = format!("<figure class=\"flame\" id=\"{}\">{}", esc(id), f.svg);
    if !f.groups.is_empty() {
        let _ = write!(o, "<figcaption class=\"flame-legend\">");
        for g in &f.groups {
            let (r, gr, b) = group_colour(*g);
            let _ = write!(
                o,
                "<span class=\"swatch\" style=\"background:#{r:02x}{gr:02x}{b:02x}\"></span>{}",
                esc(group_label(*g))
            );
        }
        let _ = write!(o, "</figcaption>");
    }
    o.push_str("</figure>\n");
    o
}

/// An experiment's differential flame graphs: for each difference between arms that is not
/// withheld (`profile_differences`), the arm's stacks merged over its runs against its
/// baseline's, at that end; a pair that cannot be drawn says why in words.
pub fn arm_differences(tests: &[netrig_document::experiment::TestOutcome]) -> String {
    let mut o = String::new();
    for (t, p) in tests.iter().flat_map(|t| t.points.iter().map(move |p| (t, p))) {
        for (k, d) in p.profile_differences.iter().enumerate() {
            if d.withheld.is_some() {
                continue;
            }
            let stacks = |name: &str| {
                p.arms
                    .iter()
                    .find(|a| a.arm == name)
                    .and_then(|a| a.profile.as_ref())
                    .map(|pr| pr.end(&d.end))
            };
            let (Some(base), Some(arm)) = (stacks(&d.baseline), stacks(&d.arm)) else {
                continue;
            };
            let at: Vec<String> = p.point.values.iter().map(|(o, v)| format!("{o} {v}")).collect();
            let _ = writeln!(
                o,
                "<h3>{} {}: {} against {}, the {} end</h3>",
                esc(&t.kind),
                esc(&at.join(" ")),
                esc(&d.arm),
                esc(&d.baseline),
                esc(&d.end)
            );
            let a = ArmStacks {
                name: &d.baseline,
                folded: &base.folded,
                samples: base.samples,
            };
            let b = ArmStacks {
                name: &d.arm,
                folded: &arm.folded,
                samples: arm.samples,
            };
            match differential(&a, &b) {
                Ok(f) => o.push_str(&figure(&format!("flame-diff-{}-{k}", o.len()), &f)),
                Err(why) => {
                    let _ = writeln!(o, "<p>No differential flame graph: {}</p>", esc(&why));
                }
            }
        }
    }
    if o.is_empty() {
        return o;
    }
    format!(
        "<h2>Profile: where the arms' CPU time differs</h2>\n<p class=\"muted\">Each arm's stacks summed over its profiled runs, drawn against its baseline's as shares of each arm's own samples.</p>\n{o}"
    )
}

/// The report's "Profile" section: each end's flame graph, or in words why it has none.
pub fn section(p: &ProfileResult) -> String {
    let mut o = String::from("<h2>Profile</h2>\n");
    for (end, key, e) in [
        ("local (client)", "local", &p.local),
        ("remote (agent)", "remote", &p.remote),
    ] {
        let why = match e {
            EndProfile::Withheld { withheld } => cut(withheld, MAX_WORDS).0,
            EndProfile::Profiled(prof) => match end_flame(end, prof) {
                Ok(f) => {
                    o.push_str(&figure(&format!("flame-{key}"), &f));
                    continue;
                }
                Err(e) => e,
            },
        };
        let _ = writeln!(
            o,
            "<p class=\"flame-withheld\" id=\"flame-{key}\"><strong>{end}</strong>: no flame graph: {}</p>",
            esc(&why)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_document::result::profile::ProfileSplit;

    /// Folded stacks as the sampler writes them for a loopback TCP stream, with a ruleset.
    const STREAM: &[(&str, u64)] = &[
        ("netrig;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_sendto;__sys_sendto;tcp_sendmsg;tcp_sendmsg_locked;_copy_from_iter", 120),
        ("netrig;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_sendto;__sys_sendto;tcp_sendmsg;tcp_sendmsg_locked;tcp_push;__tcp_transmit_skb;ip_output;ip_finish_output2;__dev_queue_xmit;loopback_xmit", 40),
        ("netrig;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_recvfrom;__sys_recvfrom;tcp_recvmsg;tcp_recvmsg_locked;skb_copy_datagram_iter;_copy_to_iter", 90),
        ("netrig;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_sendto;__sys_sendto;tcp_sendmsg;__local_bh_enable_ip;do_softirq;handle_softirqs;net_rx_action;__netif_receive_skb_core;ip_rcv;nf_hook_slow;nft_do_chain [nf_tables]", 10),
        ("swapper;secondary_startup_64;cpu_startup_entry;do_idle;default_idle_call;pv_native_safe_halt", 300),
    ];

    fn stacks(s: &[(&str, u64)]) -> Vec<FoldedStack> {
        s.iter()
            .map(|(stack, samples)| FoldedStack {
                stack: stack.to_string(),
                samples: *samples,
            })
            .collect()
    }

    fn profiled(folded: Vec<FoldedStack>) -> Profiled {
        let samples = folded.iter().fold(17, |n, s| s.samples.saturating_add(n));
        Profiled {
            window_s: 2.0,
            cpus: 2,
            frequency_hz: 999,
            samples,
            busy_samples: samples / 2,
            lost_samples: 0,
            dropped_samples: 0,
            split: ProfileSplit::default(),
            demand_unit: "us/KB".into(),
            groups: vec![],
            top_functions: vec![],
            folded_total: folded.len() as u64 + 3,
            folded,
            witness: None,
            throttles: 0,
            softirqs: Default::default(),
            softnet: Default::default(),
        }
    }

    /// The fill of the frame `name` (the first one drawn), from its tooltip on.
    fn fill_of(svg: &str, name: &str) -> (u8, u8, u8) {
        let at = svg
            .find(&format!("<title>{name} ("))
            .unwrap_or_else(|| panic!("no frame {name}"));
        let fill = at + svg[at..].find("fill=\"rgb(").unwrap() + "fill=\"rgb(".len();
        let rgb: Vec<u8> = svg[fill..fill + svg[fill..].find(')').unwrap()]
            .split(',')
            .map(|c| c.parse().unwrap())
            .collect();
        (rgb[0], rgb[1], rgb[2])
    }

    /// Nothing of inferno's standalone file that would break or restyle the page.
    fn fits_inline(svg: &str) {
        assert!(svg.starts_with("<svg class=\"flamegraph"), "{}", &svg[..100]);
        for banned in [
            "<?xml",
            "<!DOCTYPE",
            "<script",
            "<style",
            " id=\"",
            "onload",
            "<!--",
            "CDATA",
        ] {
            assert!(!svg.contains(banned), "{banned} in the SVG");
        }
        assert_eq!(svg.matches("<svg").count(), svg.matches("</svg>").count());
        assert_eq!(svg.matches("<g>").count(), svg.matches("</g>").count());
        assert!(
            !svg.chars().any(|c| c.is_control() && c != '\n'),
            "a control character"
        );
    }

    #[test]
    fn an_end_s_graph_names_its_frames_coloured_by_group_and_says_what_it_counts() {
        let p = profiled(stacks(STREAM));
        let f = end_flame("local (client)", &p).unwrap();
        fits_inline(&f.svg);
        assert_eq!(
            f.title,
            "local (client): 577 samples of every CPU at 999 Hz over 2.00 s (the measured window); 5 of 8 stacks shown"
        );
        assert!(f.svg.contains(&f.title), "the title is in the SVG");
        assert!(
            f.note
                .starts_with("widths: samples of the stacks shown (560 of 577)"),
            "{}",
            f.note
        );
        // Each frame's tooltip: its name and samples (tcp_sendmsg is in three stacks).
        assert!(f.svg.contains("<title>tcp_sendmsg (170 samples, "), "{}", f.svg);
        assert!(f.svg.contains("<title>pv_native_safe_halt (300 samples, "));
        assert_eq!(fill_of(&f.svg, "tcp_sendmsg"), group_colour(Some(Group::Tcp)));
        assert_eq!(
            fill_of(&f.svg, "_copy_from_iter"),
            group_colour(Some(Group::MemoryCopy))
        );
        assert_eq!(
            fill_of(&f.svg, "loopback_xmit"),
            group_colour(Some(Group::Device))
        );
        assert_eq!(fill_of(&f.svg, "do_idle"), group_colour(Some(Group::Idle)));
        assert_eq!(fill_of(&f.svg, "netrig"), group_colour(None));
        // A module's function: its space kept as a no-break one, its group from the module.
        assert_eq!(
            fill_of(&f.svg, "nft_do_chain\u{a0}[nf_tables]"),
            group_colour(Some(Group::Netfilter))
        );
        assert!(f.groups.contains(&Some(Group::Netfilter)) && !f.groups.contains(&Some(Group::Udp)));
        let fig = figure("flame-local", &f);
        assert!(
            fig.contains("<figure class=\"flame\" id=\"flame-local\"><svg") && fig.contains(">netfilter")
        );
    }

    #[test]
    fn hostile_names_are_escaped_cut_and_said() {
        let long = "A".repeat(10_000);
        let deep = vec!["f"; 500].join(";");
        let evil = [
            (
                "evil;</svg><script>alert(1)</script>;\"onmouseover=\"x;it's a name 12",
                50,
            ),
            ("evil;\u{1b}[31mred\u{0}", 30),
            (long.as_str(), 20),
            (deep.as_str(), 10),
            ("", 5),
        ];
        let f = end_flame("remote (agent)", &profiled(stacks(&evil))).unwrap();
        fits_inline(&f.svg);
        assert!(
            f.svg
                .contains("&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{}",
            f.svg
        );
        assert!(!f.svg.contains("<script>") && !f.svg.contains("\"onmouseover"));
        assert!(f.svg.contains("&quot;onmouseover=&quot;x"));
        // A leaf ending in a number is a name, not a differential's count.
        assert_eq!(
            fill_of(&f.svg, "it&apos;s\u{a0}a\u{a0}name\u{a0}12"),
            group_colour(None)
        );
        assert!(f.svg.contains("\u{fffd}[31mred\u{fffd}"));
        assert!(f.svg.contains(&format!("{}…", "A".repeat(MAX_NAME))));
        assert!(!f.svg.contains(&"A".repeat(MAX_NAME + 1)));
        assert!(f.svg.contains("[421 deeper frames cut]"));
        assert!(
            f.note.contains("names cut to 160 characters in 1 stacks")
                && f.note.contains("1 stacks cut to 80 frames"),
            "{}",
            f.note
        );
        assert!(f.title.ends_with("5 of 8 stacks shown"), "{}", f.title);
    }

    /// Counts no sampler could take (from a hostile peer) draw, cut and said, without overflow.
    #[test]
    fn counts_past_any_sampler_s_are_cut_and_said() {
        let huge = stacks(&[("huge;count", u64::MAX), ("huge;other", u64::MAX - 1)]);
        let f = end_flame("remote (agent)", &profiled(huge.clone())).unwrap();
        fits_inline(&f.svg);
        assert!(f.note.contains("2 counts cut to 1,099,511,627,776"), "{}", f.note);
        assert!(f.svg.contains("<title>count (1,099,511,627,776 samples, 50.00%)"));
        let small = stacks(STREAM);
        for (samples, folded) in [(u64::MAX, &huge), (1, &small)] {
            let arm = |name, folded, samples| ArmStacks {
                name,
                folded,
                samples,
            };
            let d = differential(&arm("a", folded, samples), &arm("b", &huge, u64::MAX)).unwrap();
            fits_inline(&d.svg);
        }
    }

    #[test]
    fn too_many_frames_leave_the_lightest_stacks_out_and_the_title_says_so() {
        let many: Vec<FoldedStack> = (0..3_000u64)
            .map(|i| FoldedStack {
                stack: (0..MAX_FRAMES)
                    // Names as long as they may be, each its own.
                    .map(|d| format!("f{i}_{d}_{}", "x".repeat(MAX_NAME)))
                    .collect::<Vec<_>>()
                    .join(";"),
                samples: 1 + i,
            })
            .collect();
        let mut p = profiled(many);
        p.folded_total = 3_000;
        let f = end_flame("local (client)", &p).unwrap();
        let shown = MAX_CELLS / MAX_FRAMES;
        assert!(
            f.title
                .ends_with(&format!("{} of 3,000 stacks shown", thousands(shown as u64))),
            "{}",
            f.title
        );
        // The heaviest are the ones kept.
        assert!(f.svg.contains("<title>f2999_0_x") && !f.svg.contains("<title>f0_0_x"));
        // Every frame drawn (each stack is 1/250 of the width): the most the bounds allow.
        assert_eq!(f.svg.matches("<g>").count(), MAX_CELLS + 1, "and the all frame");
        assert!(f.svg.len() < 8 << 20, "{} bytes", f.svg.len());
    }

    #[test]
    fn an_end_without_stacks_and_a_withheld_end_are_said_in_words() {
        let p = ProfileResult {
            local: EndProfile::Profiled(Box::new(profiled(vec![]))),
            remote: EndProfile::Withheld {
                withheld: "the agent's <end> is not profiled".into(),
            },
        };
        let html = section(&p);
        assert!(html.starts_with("<h2>Profile</h2>"));
        assert!(
            html.contains("<strong>local (client)</strong>: no flame graph: no folded stack has a sample")
        );
        assert!(html.contains(
            "<strong>remote (agent)</strong>: no flame graph: the agent&#39;s &lt;end&gt; is not profiled"
        ));
        assert!(!html.contains("<svg"));
    }

    /// Arm b spends a larger share in the ruleset (nft_do_chain) and a smaller one copying.
    const ARM_A: &[(&str, u64)] = &[
        ("netrig;do_syscall_64;__sys_sendto;tcp_sendmsg;tcp_sendmsg_locked;_copy_from_iter", 60),
        ("netrig;do_syscall_64;__sys_sendto;tcp_sendmsg;do_softirq;net_rx_action;ip_rcv;nf_hook_slow;nft_do_chain [nf_tables]", 20),
        ("netrig;do_syscall_64;__sys_recvfrom;tcp_recvmsg;_copy_to_iter", 20),
    ];
    const ARM_B: &[(&str, u64)] = &[
        ("netrig;do_syscall_64;__sys_sendto;tcp_sendmsg;tcp_sendmsg_locked;_copy_from_iter", 80),
        ("netrig;do_syscall_64;__sys_sendto;tcp_sendmsg;do_softirq;net_rx_action;ip_rcv;nf_hook_slow;nft_do_chain [nf_tables]", 80),
        ("netrig;do_syscall_64;__sys_recvfrom;tcp_recvmsg;_copy_to_iter", 40),
    ];

    fn red(c: (u8, u8, u8)) -> bool {
        c.0 == 255 && c.1 == c.2 && c.1 < 250
    }
    fn blue(c: (u8, u8, u8)) -> bool {
        c.2 == 255 && c.0 == c.1 && c.0 < 250
    }

    #[test]
    fn a_differential_graph_is_red_where_b_spends_a_larger_share_and_blue_a_smaller() {
        let (a, b) = (stacks(ARM_A), stacks(ARM_B));
        // Arm a took 100 samples, arm b 200: counts alone would make everything redder.
        let arm_a = ArmStacks {
            name: "no rules",
            folded: &a,
            samples: 100,
        };
        let arm_b = ArmStacks {
            name: "1000 rules",
            folded: &b,
            samples: 200,
        };
        let f = differential(&arm_a, &arm_b).unwrap();
        fits_inline(&f.svg);
        assert!(f.svg.starts_with("<svg class=\"flamegraph differential\""));
        assert!(
            f.title
                .starts_with("1000 rules against no rules: 200 samples of 1000 rules, 100 of no rules"),
            "{}",
            f.title
        );
        let nft = "nft_do_chain\u{a0}[nf_tables]";
        // Its share went from 20 % to 40 %: +40 of b's 200 samples, the largest change.
        assert!(
            f.svg
                .contains(&format!("<title>{nft} (80 samples, 40.00%; +20.00%)")),
            "{}",
            f.svg
        );
        assert_eq!(
            fill_of(&f.svg, nft),
            (255, 100, 100),
            "the largest rise, the deepest red"
        );
        assert!(blue(fill_of(&f.svg, "_copy_from_iter")), "60 % to 40 %");
        assert_eq!(fill_of(&f.svg, "_copy_to_iter"), (250, 250, 250), "20 % both");
        // inferno colours a stack's leaf by its change; the frames beneath are white.
        assert_eq!(fill_of(&f.svg, "nf_hook_slow"), (250, 250, 250));
        // The other way round, the colours swap.
        let back = differential(&arm_b, &arm_a).unwrap();
        assert!(blue(fill_of(&back.svg, nft)));
        assert!(red(fill_of(&back.svg, "_copy_from_iter")));
        assert!(back.title.starts_with("no rules against 1000 rules"));
        let none = ArmStacks {
            name: "empty",
            folded: &[],
            samples: 0,
        };
        let e = differential(&arm_a, &none).unwrap_err();
        assert!(e.contains("arm empty has no samples"), "{e}");
    }

    #[test]
    fn counts_read_with_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(3_976), "3,976");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
