//! No module loops inside any crate of the workspace (docs/architecture.md, "Layer rules").
//!
//! Within every module (a crate's root included) the child modules must form an acyclic
//! graph by what they name: child `a` depends on its sibling `b` when any file of `a` names
//! `b` or an item `b` defines (directly, or through a name the parent re-exports or imports
//! from `b`). A child may name its parent and the parent its children: the parent is the
//! module's face, and the per-file `impl Controller` blocks of nvme/ are the model. Two
//! siblings that name each other, directly or round a longer loop, fail here with the
//! files and the names that close the loop. Test code (`tests.rs` files, `mod tests`
//! blocks) is not counted: a test may reach anywhere to set up a case.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from its crate's root (`["nvme", "sets"]`); the root is `[]`.
type ModPath = Vec<String>;

/// One crate's source: every module it has files for, and the code of each.
struct CrateSrc {
    name: String,
    /// Module -> (file, code without comments and test modules).
    files: BTreeMap<ModPath, (PathBuf, String)>,
}

fn workspace_crates() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut out: Vec<PathBuf> = std::fs::read_dir(crates).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("src").is_dir()).collect();
    out.sort();
    out
}

/// The code of a file without comments and without its inline test module.
fn code_of(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|l| if l.trim_start().starts_with("//") { "" } else { l.split(" // ").next().unwrap_or("") })
        .collect::<Vec<_>>()
        .join("\n")
}

fn read_crate(dir: &Path) -> CrateSrc {
    fn walk(dir: &Path, module: &ModPath, files: &mut BTreeMap<ModPath, (PathBuf, String)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            if name == "tests" || name.ends_with("_tests") || name == "bin" {
                continue;
            }
            if p.is_dir() {
                let mut m = module.clone();
                m.push(name);
                walk(&p, &m, files);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let m = if ["mod", "lib", "main"].contains(&name.as_str()) {
                    module.clone()
                } else {
                    let mut m = module.clone();
                    m.push(name);
                    m
                };
                let code = code_of(&std::fs::read_to_string(&p).unwrap());
                files.insert(m, (p, code));
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(&dir.join("src"), &Vec::new(), &mut files);
    CrateSrc { name: dir.file_name().unwrap().to_string_lossy().to_string(), files }
}

/// Every `use` tree of `code` expanded into paths (`use a::{b, c::d as e};` -> `a::b`,
/// `a::c::d` with local names b, e), and every other `crate::`/`super::`/`self::` path.
/// Returns (path segments, local name the path is bound to, if a `use`).
fn paths_of(code: &str) -> Vec<(Vec<String>, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = code;
    let mut plain = String::new();
    // `use` statements (any visibility) up to their `;`.
    while let Some(i) = find_use(rest) {
        plain.push_str(&rest[..i]);
        let after = &rest[i..];
        let end = after.find(';').unwrap_or(after.len());
        // Whitespace collapsed and dropped around punctuation: `a::{b, c as d}` -> `a::{b,c as d}`.
        let words: Vec<&str> = after[4..end].split_whitespace().collect();
        let tree = words.join(" ").replace(" ::", "::").replace(":: ", "::").replace(", ", ",").replace(" ,", ",");
        let tree = tree.replace("{ ", "{").replace(" {", "{").replace(" }", "}").replace("} ", "}");
        expand(&tree, &mut Vec::new(), &mut out);
        rest = &after[end..];
    }
    plain.push_str(rest);
    // Paths in code: crate::a::b, super::super::x, self::y.
    let bytes = plain.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(k) = plain[from..].find(start) {
            let at = from + k;
            from = at + start.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':') {
                continue;
            }
            let tail: String = plain[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
            let segs: Vec<String> = tail.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
            out.push((segs, None));
        }
    }
    out
}

/// Start of the next `use ` statement in `code` (at a line start, after an optional `pub`).
fn find_use(code: &str) -> Option<usize> {
    let mut pos = 0;
    for line in code.split_inclusive('\n') {
        let t = line.trim_start();
        let t2 = t.strip_prefix("pub(crate) ").or_else(|| t.strip_prefix("pub(super) ")).or_else(|| t.strip_prefix("pub ")).unwrap_or(t);
        if t2.starts_with("use ") {
            return Some(pos + (line.len() - t2.len()));
        }
        pos += line.len();
    }
    None
}

fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    // Split the top level of `tree` at commas outside braces.
    let mut parts = Vec::new();
    let (mut depth, mut last) = (0, 0);
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[last..i]);
                last = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[last..]);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        if let Some(b) = part.find('{') {
            let head: Vec<String> = part[..b].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
            let n = prefix.len();
            prefix.extend(head);
            expand(&part[b + 1..part.len() - 1], prefix, out);
            prefix.truncate(n);
        } else {
            let (path, alias) = match part.split_once(" as ") {
                Some((p, a)) => (p, Some(a.to_string())),
                None => (part, None),
            };
            let mut segs = prefix.clone();
            segs.extend(path.split("::").filter(|s| !s.is_empty()).map(str::to_string));
            if segs.last().is_some_and(|s| s == "self") {
                segs.pop();
            }
            let name = alias.or_else(|| segs.last().cloned()).filter(|n| !["*", "crate", "super", "self"].contains(&n.as_str()));
            out.push((segs, name));
        }
    }
}

/// Where a path written in module `at` lands: the absolute path of its first segments, or
/// None for a path outside the crate (std, another crate).
fn absolute(at: &ModPath, segs: &[String], modules: &BTreeSet<ModPath>) -> Option<Vec<String>> {
    let mut base: ModPath;
    let mut i = 0;
    match segs.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            i = 1;
        }
        Some("self") => {
            base = at.clone();
            i = 1;
        }
        Some("super") => {
            base = at.clone();
            while segs.get(i).is_some_and(|s| s == "super") {
                base.pop();
                i += 1;
            }
        }
        Some(first) => {
            // 2018 paths: a child module of `at` (a `mod` of this file) is relative.
            let mut child = at.clone();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            base = at.clone();
        }
        None => return None,
    }
    base.extend(segs[i..].iter().cloned());
    Some(base)
}

/// The module a resolved path lands in: its longest module prefix, after following the
/// names each module imports or re-exports (`use b::Thing` in the parent, then
/// `super::Thing` in a child, lands in `b`).
fn land(path: &[String], modules: &BTreeSet<ModPath>, imports: &BTreeMap<(ModPath, String), Vec<String>>, depth: u32) -> ModPath {
    let mut cur: ModPath = Vec::new();
    for (k, seg) in path.iter().enumerate() {
        let mut next = cur.clone();
        next.push(seg.clone());
        if modules.contains(&next) {
            cur = next;
            continue;
        }
        if let Some(target) = imports.get(&(cur.clone(), seg.clone())).filter(|_| depth < 8) {
            let mut p = target.clone();
            p.extend(path[k + 1..].iter().cloned());
            return land(&p, modules, imports, depth + 1);
        }
        break;
    }
    cur
}

/// Every loop among sibling modules of `src`, one line each.
fn loops_in(src: &CrateSrc) -> Vec<String> {
    let modules: BTreeSet<ModPath> = src.files.keys().cloned().collect();
    let mut imports = BTreeMap::new();
    let mut refs: Vec<(ModPath, Vec<String>)> = Vec::new();
    for (m, (_, code)) in &src.files {
        for (segs, name) in paths_of(code) {
            let Some(abs) = absolute(m, &segs, &modules) else { continue };
            if let Some(n) = name {
                imports.insert((m.clone(), n), abs.clone());
            }
            refs.push((m.clone(), abs));
        }
    }
    // Edges between siblings: parent -> (a -> b -> the file and the path that names b).
    let mut edges: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for (m, abs) in refs {
        let target = land(&abs, &modules, &imports, 0);
        let common = m.iter().zip(&target).take_while(|(a, b)| a == b).count();
        if common >= m.len() || common >= target.len() {
            continue; // an ancestor, itself or a descendant
        }
        let (a, b) = (m[common].clone(), target[common].clone());
        let path = &src.files[&m].0;
        let file = path.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()).unwrap_or(path).display().to_string();
        let how = format!("{file} names {}", abs.join("::"));
        edges.entry(m[..common].to_vec()).or_default().entry(a).or_default().entry(b).or_insert(how);
    }
    let mut found = Vec::new();
    for (parent, graph) in &edges {
        for (members, cycle) in cycles(graph) {
            let at = if parent.is_empty() { "the crate root".to_string() } else { parent.join("::") };
            let steps: Vec<String> = cycle.windows(2).map(|w| format!("{} -> {} ({})", w[0], w[1], graph[&w[0]][&w[1]])).collect();
            found.push(format!("{}: modules {{{}}} of {at} name each other, e.g. {}", src.name, members.join(", "), steps.join("; ")));
        }
    }
    found
}

/// Each strongly connected component of more than one node: its members and one cycle
/// through it (a closed walk `[a, b, ..., a]`).
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<(Vec<String>, Vec<String>)> {
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flat_map(|m| m.keys())).collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for next in graph.get(&n).into_iter().flat_map(|m| m.keys()) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in nodes {
        if done.contains(n) || !reach(n).contains(n) {
            continue;
        }
        // A shortest walk back to `n` (breadth first), and its component marked done.
        let mut prev: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([n.clone()]);
        let mut back = None;
        while let Some(x) = queue.pop_front() {
            for y in graph.get(&x).into_iter().flat_map(|m| m.keys()) {
                if y == n {
                    back = Some(x.clone());
                    queue.clear();
                    break;
                }
                if y != n && !prev.contains_key(y) {
                    prev.insert(y.clone(), x.clone());
                    queue.push_back(y.clone());
                }
            }
        }
        // Back from the node before `n` to `n`'s first successor, then n, that, ..., n.
        let mut chain = Vec::new();
        let mut x = back.expect("reachable");
        while &x != n {
            chain.push(x.clone());
            x = prev[&x].clone();
        }
        chain.reverse();
        let walk: Vec<String> = std::iter::once(n.clone()).chain(chain).chain(std::iter::once(n.clone())).collect();
        let members: Vec<String> = reach(n).into_iter().filter(|m| reach(m).contains(n)).collect();
        done.extend(members.iter().cloned());
        out.push((members, walk));
    }
    out
}

#[test]
fn no_crate_has_a_module_loop() {
    let crates = workspace_crates();
    assert!(crates.len() >= 6, "every workspace crate is read: {crates:?}");
    let loops: Vec<String> = crates.iter().map(|c| read_crate(c)).flat_map(|c| loops_in(&c)).collect();
    assert!(loops.is_empty(), "module loops (docs/architecture.md, \"Layer rules\"):\n{}", loops.join("\n"));
}

#[test]
fn the_loop_check_sees_a_loop_through_a_re_export() {
    let files = [
        (vec![], "mod a;\nmod b;\npub use b::Thing;\n"),
        (vec!["a"], "use super::Thing;\npub struct A;\n"),
        (vec!["b"], "pub struct Thing(crate::a::A);\n"),
    ];
    let src = CrateSrc {
        name: "example".into(),
        files: files.iter().map(|(m, c)| (m.iter().map(|s| s.to_string()).collect(), (PathBuf::from("x.rs"), c.to_string()))).collect(),
    };
    let loops = loops_in(&src);
    assert_eq!(loops.len(), 1, "{loops:?}");
    assert!(loops[0].contains("a -> b") && loops[0].contains("b -> a"), "{}", loops[0]);
    // Parent and child naming each other is no loop.
    let ok = CrateSrc {
        name: "example".into(),
        files: [(vec![], "mod a;\nuse a::A;\npub struct P;\n"), (vec!["a"], "use super::P;\npub struct A;\n")]
            .iter()
            .map(|(m, c)| (m.iter().map(|s| s.to_string()).collect(), (PathBuf::from("x.rs"), c.to_string())))
            .collect(),
    };
    assert!(loops_in(&ok).is_empty());
}
