//! The house rules a newcomer relies on (#40), checked on the source itself: no function over
//! 150 lines in crates/*/src, main.rs under 250 lines, and each crate's modules a DAG (no
//! module uses a sibling that uses it back, directly or around a ring). What still breaks a rule
//! is listed below by name, to be cut; the test fails when anything else breaks one, and when a
//! listed one no longer does (so that the list only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::spanned::Spanned;
use syn::visit::Visit;

const LONGEST_FN: usize = 150;
const MAIN_RS_LINES: usize = 250;

/// Functions over [`LONGEST_FN`] lines still to be cut: "crate/src/file.rs name".
const LONG_FNS_TO_CUT: &[&str] = &[];

/// Rings of sibling modules still to be untangled, as the test prints them (none left: a new
/// one is moved apart, its shared types below the logic that uses them, before it lands).
const CYCLES_TO_UNTANGLE: &[&str] = &[];

/// Whether main.rs is still over [`MAIN_RS_LINES`].
const MAIN_RS_TO_CUT: bool = false;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every crate's name and its src files.
fn sources() -> Vec<(String, PathBuf, Vec<PathBuf>)> {
    let mut crates: Vec<_> = std::fs::read_dir(crates_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let src = p.join("src");
            let mut files = Vec::new();
            rust_files(&src, &mut files);
            files.sort();
            (name, src, files)
        })
        .collect();
    crates.sort();
    assert!(crates.len() >= 10, "found only {} crates", crates.len());
    crates
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file).unwrap();
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Functions (free, in impls and with bodies in traits) and their lengths in lines, from the
/// line of `fn` to the closing brace (doc comments and attributes not counted).
struct Lengths(Vec<(String, usize)>);

impl Lengths {
    fn add(&mut self, sig: &syn::Signature, body: &syn::Block) {
        let lines = body.span().end().line + 1 - sig.fn_token.span.start().line;
        self.0.push((sig.ident.to_string(), lines));
    }
}

impl<'a> Visit<'a> for Lengths {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.add(&f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.add(&f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.add(&f.sig, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_function_over_150_lines_and_main_rs_under_250() {
    let mut long = BTreeSet::new();
    let mut seen = 0;
    for (name, src, files) in sources() {
        for file in files {
            let mut v = Lengths(Vec::new());
            v.visit_file(&parse(&file));
            seen += v.0.len();
            let rel = file.strip_prefix(&src).unwrap().display().to_string();
            for (f, n) in v.0 {
                if n > LONGEST_FN {
                    long.insert((format!("{name}/src/{rel} {f}"), n));
                }
            }
        }
    }
    assert!(seen > 1000, "only {seen} functions read");
    let named: BTreeSet<&str> = long.iter().map(|(k, _)| k.as_str()).collect();
    let new: Vec<_> = long
        .iter()
        .filter(|(k, _)| !LONG_FNS_TO_CUT.contains(&k.as_str()))
        .collect();
    let cut: Vec<_> = LONG_FNS_TO_CUT.iter().filter(|k| !named.contains(**k)).collect();
    assert!(
        new.is_empty(),
        "functions over {LONGEST_FN} lines (cut them along the decisions they make): {new:?}"
    );
    assert!(
        cut.is_empty(),
        "no longer over {LONGEST_FN} lines: take them off LONG_FNS_TO_CUT: {cut:?}"
    );
    let main_rs = std::fs::read_to_string(crates_dir().join("netrig/src/main.rs")).unwrap();
    let lines = main_rs.lines().count();
    assert_eq!(
        lines >= MAIN_RS_LINES,
        MAIN_RS_TO_CUT,
        "main.rs has {lines} lines (the rule: under {MAIN_RS_LINES}; MAIN_RS_TO_CUT says whether it is still over)"
    );
}

/// A module's path in its crate: src/a/b.rs and src/a/b/mod.rs are ["a", "b"].
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The module paths a file refers to: `crate::`, `super::` and `self::` paths, in `use`
/// declarations and in code, made absolute. Inline `mod tests` blocks are left out: a test
/// module may use whatever it tests.
struct Refs<'m> {
    here: &'m [String],
    out: BTreeSet<Vec<String>>,
}

impl Refs<'_> {
    fn absolute(&self, segs: &[String]) -> Option<Vec<String>> {
        let mut at: Vec<String> = self.here.to_vec();
        let mut rest = segs;
        match segs.first().map(String::as_str) {
            Some("crate") => {
                at.clear();
                rest = &segs[1..];
            }
            Some("self") => rest = &segs[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    at.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        at.extend(rest.iter().cloned());
        Some(at)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, t: &syn::UseTree) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.push(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.push(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.push(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn push(&mut self, segs: &[String]) {
        if let Some(p) = self.absolute(segs) {
            self.out.insert(p);
        }
    }
}

impl<'a> Visit<'a> for Refs<'_> {
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }
    fn visit_path(&mut self, p: &'a syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.push(&segs);
        syn::visit::visit_path(self, p);
    }
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        let test = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string().contains("test"))
        });
        if !test {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

/// Rings among sibling modules: for every module with children, its children are the nodes and
/// a child uses another when anything in it (its own children included) refers into the other.
fn cycles(name: &str, src: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut refs: Vec<(Vec<String>, BTreeSet<Vec<String>>)> = Vec::new();
    for file in files {
        let here = module_of(src, file);
        let mut r = Refs {
            here: &here,
            out: BTreeSet::new(),
        };
        r.visit_file(&parse(file));
        let out = r.out;
        refs.push((here, out));
    }
    let modules: BTreeSet<Vec<String>> = refs.iter().map(|(m, _)| m.clone()).collect();
    // parent -> child -> the siblings it uses
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (here, out) in &refs {
        for target in out {
            // The deepest common parent of the two, and the children of it on either side.
            let common = here.iter().zip(target.iter()).take_while(|(a, b)| a == b).count();
            if common >= here.len() || common >= target.len() {
                continue; // a module and its own ancestors or descendants
            }
            let parent = here[..common].to_vec();
            let (from, to) = (here[common].clone(), target[common].clone());
            let mut child = parent.clone();
            child.push(to.clone());
            if !modules.contains(&child) {
                continue; // an item of the parent, not a module
            }
            edges
                .entry(parent)
                .or_default()
                .entry(from)
                .or_default()
                .insert(to);
        }
    }
    let mut rings = Vec::new();
    for (parent, graph) in &edges {
        for ring in strongly_connected(graph) {
            let at = if parent.is_empty() {
                String::new()
            } else {
                format!("{}::", parent.join("::"))
            };
            rings.push(format!(
                "{name}: {}",
                ring.iter()
                    .map(|m| format!("{at}{m}"))
                    .collect::<Vec<_>>()
                    .join(" <-> ")
            ));
        }
    }
    rings
}

/// The strongly connected components of more than one node (Tarjan's algorithm), each sorted.
fn strongly_connected(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'g> {
        g: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, (usize, usize)>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'g> T<'g> {
        fn visit(&mut self, v: &'g str) {
            self.index.insert(v, (self.next, self.next));
            self.next += 1;
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.index[w.as_str()].1.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                } else if self.on.contains(w.as_str()) {
                    let low = self.index[w.as_str()].0.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut ring = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    ring.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if ring.len() > 1 {
                    ring.sort();
                    self.out.push(ring);
                }
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn each_crate_s_modules_form_a_dag() {
    let mut rings = Vec::new();
    for (name, src, files) in sources() {
        rings.extend(cycles(&name, &src, &files));
    }
    let new: Vec<_> = rings
        .iter()
        .filter(|r| !CYCLES_TO_UNTANGLE.contains(&r.as_str()))
        .collect();
    let gone: Vec<_> = CYCLES_TO_UNTANGLE
        .iter()
        .filter(|r| !rings.iter().any(|x| x == *r))
        .collect();
    assert!(
        new.is_empty(),
        "modules that use each other (move what both need where it belongs): {new:#?}"
    );
    assert!(
        gone.is_empty(),
        "untangled: take them off CYCLES_TO_UNTANGLE: {gone:?}"
    );
}

/// The ring finder itself, on a made-up graph: a ring of three and a chain beside it.
#[test]
fn the_ring_finder_finds_a_ring_and_not_a_chain() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"]),
        ("c", &["a", "d"]),
        ("d", &["e"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    assert_eq!(strongly_connected(&g), vec![vec!["a", "b", "c"]]);
}
