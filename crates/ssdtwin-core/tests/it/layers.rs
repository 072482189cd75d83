//! The layer rules of docs/architecture.md, enforced: which module of ssdtwin-core may name
//! which, and which crate may depend on which. A change that breaks a rule fails here with
//! the file and the reference; changing a rule means changing this table and the document.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the modules of the crate it may name (`crate::X`). Leaves first.
const RULES: &[(&str, &[&str])] = &[
    ("units", &[]),
    ("util", &[]),
    ("rng", &[]),
    ("theory", &[]),
    ("stats", &[]),
    ("bigarray", &[]),
    // How far a long run is (units and totals); the engine and the cluster report it.
    ("progress", &[]),
    ("faults", &[]),
    ("fsio", &["faults"]),
    ("spec", &["units"]),
    ("nand", &["spec", "util"]),
    // The FTL sees no time, no files, no controller.
    ("ftl", &["bigarray", "nand", "spec", "units", "util"]),
    // The controller is the only module that names the FTL.
    ("nvme", &["bigarray", "fsio", "ftl", "nand", "rng", "spec", "units", "util"]),
    ("workload", &["progress", "rng", "units", "util"]),
    // Host stacks (write-shaping tiers) are time-free state machines: no controller, no FTL,
    // no engine; the engine times what they return.
    ("host", &["spec"]),
    ("engine", &["host", "nand", "nvme", "progress", "rng", "spec", "stats", "units", "util", "workload"]),
    ("journal", &["fsio", "nand", "nvme"]),
    ("image", &["bigarray", "fsio", "journal", "nvme", "spec"]),
    // Replicated volumes over a network model: drives only through the controller and the
    // engine's DeviceTiming::submit, never the FTL or the NAND layer.
    ("cluster", &["engine", "nvme", "progress", "rng", "spec", "stats", "util", "workload"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its unit tests (test code may reach across layers to set
/// up a case) and without comments.
fn code_of(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end].lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// (module, file, referenced module) for every `crate::X` in non-test code.
fn references() -> Vec<(String, PathBuf, String)> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap();
        if rel.file_name().is_some_and(|n| n == "tests.rs") || rel == Path::new("lib.rs") {
            continue;
        }
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
        let module = first.trim_end_matches(".rs").to_string();
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        let mut rest = code.as_str();
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + 7..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if !name.is_empty() && name != module {
                out.push((module.clone(), rel.to_path_buf(), name));
            }
        }
    }
    out
}

#[test]
fn modules_name_only_the_layers_below_them() {
    let rules: BTreeMap<&str, BTreeSet<&str>> = RULES.iter().map(|(m, d)| (*m, d.iter().copied().collect())).collect();
    let mut broken = BTreeSet::new();
    for (module, file, dep) in references() {
        match rules.get(module.as_str()) {
            None => {
                broken.insert(format!("{}: module '{module}' has no rule in tests/it/layers.rs", file.display()));
            }
            Some(allowed) if !allowed.contains(dep.as_str()) => {
                broken.insert(format!("{}: '{module}' names crate::{dep}, which its layer may not", file.display()));
            }
            _ => {}
        }
    }
    assert!(
        broken.is_empty(),
        "layer rules broken (docs/architecture.md, \"Layer rules\"):\n{}",
        broken.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_rules_are_acyclic_and_cover_every_module() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ").or_else(|| l.trim().strip_prefix("pub(crate) mod ")))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    let ruled: BTreeSet<String> = RULES.iter().map(|(m, _)| m.to_string()).collect();
    assert_eq!(declared, ruled, "every module of lib.rs needs a rule (and every rule a module)");
    // Listed leaves first: each module may only name modules listed before it.
    let mut seen = BTreeSet::new();
    for (m, deps) in RULES {
        for d in *deps {
            assert!(seen.contains(d) || (*m == "fsio" && *d == "faults"), "{m} may name {d}, which is not below it");
        }
        seen.insert(*m);
    }
    assert!(lib.contains("pub(crate) mod ftl;"), "the FTL is private to the crate: only the controller exposes it");
}

/// Which workspace crate may depend on which (normal dependencies, from the manifests).
#[test]
fn crates_depend_only_downwards() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let allowed: &[(&str, &[&str])] = &[
        ("ssdtwin-core", &[]),
        // The NBD protocol knows no drive.
        ("ssdtwin-nbd", &[]),
        ("ssdtwin-serve", &["ssdtwin-core", "ssdtwin-nbd"]),
        ("ssdtwin-sim", &["ssdtwin-core", "ssdtwin-nbd", "ssdtwin-serve"]),
        ("ssdtwin-py", &["ssdtwin-core", "ssdtwin-nbd", "ssdtwin-serve"]),
        ("ssdtwin-bench", &["ssdtwin-core"]),
    ];
    for (name, ok) in allowed {
        let manifest = crates.join(name).join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let deps = text.split("\n[").find(|s| s.starts_with("dependencies]")).unwrap_or("");
        for line in deps.lines().skip(1) {
            let dep = line.split(['=', ' ', '.']).next().unwrap_or("");
            if dep.starts_with("ssdtwin-") {
                assert!(ok.contains(&dep), "{}: {name} may not depend on {dep}", manifest.display());
            }
        }
    }
}
