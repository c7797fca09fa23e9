//! What packagers install beside the binary: shell completions and man
//! pages, both generated from the whole command line ([`cli::command`],
//! with a subcommand per test kind), so they never drift from `--help`.

use crate::cli::{self, CompletionsArgs, ManArgs};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The binary's name in the scripts and pages.
const BIN: &str = "netrig";

/// Writes `shell`'s completion script for the whole command line to `out`.
pub fn completions_to(shell: clap_complete::Shell, out: &mut dyn Write) {
    clap_complete::generate(shell, &mut cli::command(), BIN, out);
}

/// `netrig completions SHELL`: the script on stdout.
pub fn completions(a: &CompletionsArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    completions_to(a.shell, &mut out);
    out.flush().context("writing the completion script")
}

/// The man pages as (file name, roff text): `netrig.1`, then
/// `netrig-SUB.1` for each subcommand shown in `--help` (hidden ones and
/// `help` left out).
pub fn man_pages() -> Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = cli::command();
    cmd.build();
    let mut pages = vec![(format!("{BIN}.1"), render(cmd.clone())?)];
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        // clap (without its "string" feature) names commands with &'static str: a
        // few short strings leaked, once, by a command that exits next.
        let name: &'static str = Box::leak(format!("{BIN}-{}", sub.get_name()).into_boxed_str());
        let bin: &'static str = Box::leak(format!("{BIN} {}", sub.get_name()).into_boxed_str());
        let page = sub
            .clone()
            .name(name)
            .bin_name(bin)
            .version(env!("CARGO_PKG_VERSION"));
        pages.push((format!("{name}.1"), render(page)?));
    }
    Ok(pages)
}

fn render(cmd: clap::Command) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut buf)
        .context("rendering a man page")?;
    Ok(buf)
}

/// Writes the man pages into `dir` (made if missing); returns their paths.
pub fn write_man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    man_pages()?
        .into_iter()
        .map(|(file, text)| {
            let path = dir.join(file);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        })
        .collect()
}

/// `netrig man [-o DIR]`: the pages' paths on stdout, one a line.
pub fn man(a: &ManArgs) -> Result<()> {
    for path in write_man_pages(&a.out_dir)? {
        println!("{}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(shell: clap_complete::Shell) -> String {
        let mut buf = Vec::new();
        completions_to(shell, &mut buf);
        String::from_utf8(buf).expect("UTF-8")
    }

    #[test]
    fn bash_completes_the_kinds_and_their_options() {
        let s = text(clap_complete::Shell::Bash);
        assert!(s.contains("tcp-stream"), "no tcp-stream subcommand");
        assert!(s.contains("--message-size"), "no tcp-stream option");
        assert!(s.contains("serve"));
    }

    #[test]
    fn every_shell_has_a_script() {
        use clap_complete::Shell::*;
        for shell in [Bash, Zsh, Fish, Elvish, PowerShell] {
            assert!(text(shell).contains("tcp-stream"), "{shell}");
        }
    }

    #[test]
    fn man_pages_cover_the_kinds_and_their_options() {
        let pages = man_pages().unwrap();
        let page = |name: &str| {
            let (_, t) = pages
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("no {name}"));
            String::from_utf8(t.clone()).unwrap()
        };
        let top = page("netrig.1");
        assert!(top.contains(".TH"), "{top}");
        assert!(top.contains("tcp\\-stream"), "the top page lists the kinds");
        let tcp = page("netrig-tcp-stream.1");
        assert!(tcp.contains(".TH netrig-tcp-stream 1"), "{tcp}");
        assert!(tcp.contains("\\-\\-message\\-size"), "{tcp}");
        assert!(tcp.contains("\\-\\-host"), "the run's options too");
        assert!(pages.iter().any(|(n, _)| n == "netrig-serve.1"));
        assert!(!pages
            .iter()
            .any(|(n, _)| ["netrig-man.1", "netrig-completions.1", "netrig-help.1"].contains(&n.as_str())));
    }
}
