#!/usr/bin/env python3
"""Extract the JSON keys nvme-cli prints, per verb, from its C source (its JSON printers).

    python3 extract.py NVME_CLI_CHECKOUT [--ref v2.4] > keys.json

reads the printers at ``--ref`` (``git show REF:FILE`` in the checkout; without --ref the
files of the work tree) and writes, per verb, the keys in the order nvme-cli adds them with
their JSON type, nested objects as ``parent.key``, array elements as ``array[].key``. The
types follow nvme-cli's util/json.h built against json-c >= 0.14 (CONFIG_JSONC_14, Debian 12
has json-c 0.16): ``int``, ``uint``, ``uint64``, ``uint128`` and ``float`` print as JSON
numbers, ``double`` as a string (util_json_object_new_double prints "%Lf" into a string).

The walk is over statements, not a C parser: it tracks objects as they are created
(``x = json_create_object()``), the keys added to each, where each is linked (an object or
array under a key, an element of an array) and the ``if``/``else`` conditions around each
call. Every condition and every computed key a printer uses must be named in VERBS below
(how the twin answers it); an unknown one stops the script, so a printer that changes is
noticed instead of read wrongly.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

#: json_object_add_value_<kind> -> the JSON type it prints (uint128: see value_types).
VALUE_TYPES = {
    "int": "number",
    "uint": "number",
    "uint64": "number",
    "uint128": "number",
    "float": "number",
    "double": "string",
    "string": "string",
}

# One verb: the file and function of its printer, the truth of each condition the printer
# tests (by its C text, whitespace squeezed), and what a computed key stands for (None: the
# twin never prints it, e.g. temperature sensors it does not have).
VERBS: dict[str, dict] = {
    "id-ctrl": {
        "file": "nvme-print-json.c",
        "function": "json_nvme_id_ctrl",
        "conditions": {"strlen(subnqn)": True, "vs": False},
    },
    "id-ns": {
        "file": "nvme-print-json.c",
        "function": "json_nvme_id_ns",
        # cap_only: `id-ns --capabilities` only; nsfeat bit 4: the twin reports npwg..nows.
        "conditions": {"!cap_only": True, "ns->nsfeat & 0x10": True},
    },
    "smart-log": {
        "file": "nvme-print-json.c",
        "function": "json_smart_log",
        "conditions": {"human": False, "temp == 0": True},
        "computed": {"key": None},
    },
    "smart-log -H": {
        "file": "nvme-print-json.c",
        "function": "json_smart_log",
        "conditions": {"human": True, "temp == 0": True},
        "computed": {"key": None},
    },
    "error-log": {"file": "nvme-print-json.c", "function": "json_error_log"},
    "fw-log": {
        "file": "nvme-print-json.c",
        "function": "json_fw_log",
        "conditions": {"fw_log->frs[i][0]": True},
        "computed": {"devname": "<device>", "fmt": "Firmware Rev Slot <n>"},
    },
    "endurance-log": {"file": "nvme-print-json.c", "function": "json_endurance_log"},
    "sanitize-log": {
        "file": "nvme-print-json.c",
        "function": "json_sanitize_log",
        "computed": {"devname": "<device>"},
    },
    "ana-log": {"file": "nvme-print-json.c", "function": "json_ana_log"},
    "predictable-lat-log": {"file": "nvme-print-json.c", "function": "json_predictable_latency_per_nvmset"},
    "pred-lat-event-agg-log": {"file": "nvme-print-json.c", "function": "json_predictable_latency_event_agg_log"},
    "id-nvmset": {"file": "nvme-print-json.c", "function": "json_nvme_id_nvmset"},
    "list-ns": {
        "file": "nvme-print-json.c",
        "function": "json_nvme_list_ns",
        "conditions": {"ns_list->ns[i]": True},
    },
    "list-ctrl": {"file": "nvme-print-json.c", "function": "json_nvme_list_ctrl"},
    "list": {"file": "nvme-print-json.c", "function": "json_simple_list"},
    # hostid: /etc/nvme/hostid exists (Debian's nvme-cli package writes it).
    "list -v": {"file": "nvme-print-json.c", "function": "json_detail_list", "conditions": {"hostid": True}},
    "intel smart-log-add": {"file": "plugins/intel/intel-nvme.c", "function": "show_intel_smart_log_jsn"},
}


@dataclass
class Node:
    """One JSON object or array nvme-cli builds: its kind and its members in order."""

    kind: str  # "object" or "array"
    members: list[tuple[str, object]] = field(default_factory=list)  # (key, type or Node); key "[]" in arrays


def function_body(src: str, name: str) -> str:
    m = re.search(r"^[^\n;{}]*\b" + re.escape(name) + r"\s*\([^;{]*\)\s*\{", src, re.M)
    if not m:
        sys.exit(f"extract.py: function {name} not found")
    i, depth = m.end(), 1
    while depth:
        c = src[i]
        if c == '"':
            i = src.index('"', i + 1)
            while src[i - 1] == "\\":
                i = src.index('"', i + 1)
        elif c == "'":
            i = src.index("'", i + 1 + (src[i + 1] == "\\"))
        elif src.startswith("/*", i):
            i = src.index("*/", i) + 1
        elif src.startswith("//", i):
            i = src.index("\n", i)
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    return src[m.end() : i - 1]


def balanced(text: str, i: int) -> int:
    """The index after the parenthesis that closes the one at ``text[i]``."""
    depth = 0
    while True:
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        elif text[i] == '"':
            i = text.index('"', i + 1)
        i += 1


def squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def statements(body: str) -> list[tuple[str, tuple[str, ...]]]:
    """The body's statements, each with the conditions (C text; ``!`` for an else) it runs
    under, and "{" / "}" where blocks open and close (declarations are scoped). Loops
    (``for``, libnvme's ``*_for_each*`` macros) are no condition: their body's objects
    describe every element."""
    out: list[tuple[str, tuple[str, ...]]] = []
    stack: list[tuple[str, ...]] = [()]  # conditions of each open block
    pending: Optional[str] = None  # the condition of the next statement or block
    last_if: list[Optional[str]] = [None]  # per block level: the if whose else may follow
    single = False  # the pending condition covers one statement, not a block
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c.isspace():
            i += 1
            continue
        if body.startswith("/*", i):
            i = body.index("*/", i) + 2
            continue
        if body.startswith("//", i):
            i = body.index("\n", i)
            continue
        word = re.match(r"[A-Za-z_]\w*", body[i:])
        if word and (word.group() in ("if", "for", "while", "switch") or "_for_each" in word.group()):
            j = body.index("(", i)
            end = balanced(body, j)
            cond = squeeze(body[j + 1 : end - 1]) if word.group() == "if" else None
            prev = pending
            pending = cond if prev is None else (f"{prev} && {cond}" if cond else prev)
            if word.group() == "if":
                last_if[-1] = cond
            i, single = end, True
            continue
        if word and word.group() == "else":
            cond = last_if[-1]
            pending = f"!({cond})"
            i, single = i + 4, True
            continue
        if c == "{":
            stack.append(stack[-1] + ((pending,) if pending else ()))
            last_if.append(None)
            pending, single = None, False
            out.append(("{", ()))
            i += 1
            continue
        if c == "}":
            stack.pop()
            last_if.pop()
            out.append(("}", ()))
            i += 1
            continue
        # A statement up to its semicolon (parentheses and strings balanced).
        j = i
        while body[j] != ";":
            if body[j] == "(":
                j = balanced(body, j)
                continue
            if body[j] == '"':
                j = body.index('"', j + 1)
            j += 1
        conds = stack[-1] + ((pending,) if pending and single else ())
        out.append((squeeze(body[i:j]), conds))
        if single:
            pending, single = None, False
        i = j + 1
    return out


def holds(conds: tuple[str, ...], truth: dict[str, bool], where: str) -> bool:
    for c in conds:
        for part in c.split(" && "):
            neg = part.startswith("!(") and part.endswith(")")
            key = part[2:-1] if neg else part
            if key not in truth:
                sys.exit(f"extract.py: {where}: condition '{key}' is not named in VERBS")
            if truth[key] == neg:
                return False
    return True


ADD = re.compile(r"^json_object_add_value_(\w+)\(\s*(\w+)\s*,\s*(\"[^\"]*\"|\w+)\s*,\s*(.*)\)$", re.S)
ARRAY_ADD = re.compile(r"^json_array_add_value_object\(\s*(\w+)\s*,\s*(.*)\)$", re.S)
CREATE = re.compile(r"^(?:struct json_object \*|json_object \*)?(\w+)\s*=\s*json_create_(object|array)\(\s*\)$")


def value_types(json_c: str) -> dict[str, str]:
    """VALUE_TYPES for this version's util/json.c: up to v2.3 a 128-bit value is a JSON
    string; v2.4 gave it a serializer that prints its digits unquoted (a number)."""
    unquoted = "util_json_object_string_to_number" in json_c
    return {**VALUE_TYPES, "uint128": "number" if unquoted else "string"}


def walk(src: str, name: str, verb: dict, where: str, types: dict[str, str]) -> Node:
    """The object a printer prints (or, for a helper, returns)."""
    truth = {squeeze(k): v for k, v in verb.get("conditions", {}).items()}
    computed = verb.get("computed", {})
    current: dict[str, Node] = {}
    scopes: list[dict[str, Optional[Node]]] = [{}]  # per open block: what its declarations hid
    printed: Optional[Node] = None
    for stmt, conds in statements(function_body(src, name)):
        if stmt == "{":
            scopes.append({})
            continue
        if stmt == "}":
            for var, hidden in scopes.pop().items():
                if hidden is None:
                    current.pop(var, None)
                else:
                    current[var] = hidden
            continue
        m = CREATE.search(stmt)
        if m:
            if re.match(r"(struct )?json_object \*", stmt) and m.group(1) not in scopes[-1]:
                scopes[-1][m.group(1)] = current.get(m.group(1))
            current[m.group(1)] = Node(m.group(2))
        if not holds(conds, truth, f"{where} {stmt[:60]}"):
            continue
        m = ADD.match(stmt)
        if m:
            kind, parent, key, value = m.groups()
            if key.startswith('"'):
                key = key[1:-1]
            elif key in computed:
                if computed[key] is None:
                    continue
                key = computed[key]
            else:
                sys.exit(f"extract.py: {where}: computed key '{key}' is not named in VERBS")
            if kind in ("object", "array"):
                current[parent].members.append((key, current[value.strip()]))
            else:
                current[parent].members.append((key, types[kind]))
            continue
        m = ARRAY_ADD.match(stmt)
        if m:
            arr, value = m.group(1), m.group(2).strip()
            call = re.match(r"(\w+)\(", value)
            child = walk(src, call.group(1), verb, where, types) if call else current[value]
            current[arr].members.append(("[]", child))
            continue
        m = re.match(r"^json_print_object\(\s*(\w+)", stmt) or re.match(r"^return (\w+)$", stmt)
        if m and m.group(1) in current:
            printed = current[m.group(1)]
    if printed is None:
        sys.exit(f"extract.py: {where}: no printed or returned object found")
    return printed


def flatten(node: Node, prefix: str = "") -> list[list[str]]:
    """[path, type] in nvme-cli's order; an array's elements merged into one description."""
    rows: list[list[str]] = []
    seen: set[str] = set()
    for key, value in node.members:
        path = f"{prefix}[]" if key == "[]" else (f"{prefix}.{key}" if prefix else key)
        kids = flatten(value, path) if isinstance(value, Node) else []
        here = [[path, value.kind if isinstance(value, Node) else value]] if key != "[]" else []
        for row in here + kids:
            if row[0] not in seen:
                seen.add(row[0])
                rows.append(row)
    return rows


def read(checkout: Path, ref: Optional[str], file: str) -> str:
    """A file of the checkout at ``ref``; before v2.4 the JSON printers were in nvme-print.c."""
    for name in (file, "nvme-print.c") if file == "nvme-print-json.c" else (file,):
        if ref is None and (checkout / name).exists():
            return (checkout / name).read_text()
        if ref is not None:
            r = subprocess.run(["git", "-C", str(checkout), "show", f"{ref}:{name}"], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout
    sys.exit(f"extract.py: {file} not found in {checkout} at {ref or 'the work tree'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="a clone of linux-nvme/nvme-cli (or its bare git directory)")
    ap.add_argument("--ref", default=None, help="a tag or commit (default: the work tree's files)")
    args = ap.parse_args()
    commit = None
    if args.ref:
        commit = subprocess.run(
            ["git", "-C", str(args.checkout), "rev-parse", f"{args.ref}^{{commit}}"], check=True, capture_output=True, text=True
        ).stdout.strip()
    out: dict = {
        "nvme-cli": {"ref": args.ref, "commit": commit, "json-c": ">= 0.14 (CONFIG_JSONC_14)"},
        "verbs": {},
    }
    types = value_types(read(args.checkout, args.ref, "util/json.c"))
    out["nvme-cli"]["uint128"] = types["uint128"]
    for verb, spec in VERBS.items():
        src = read(args.checkout, args.ref, spec["file"])
        root = walk(src, spec["function"], spec, verb, types)
        out["verbs"][verb] = {"source": f"{spec['file']}:{spec['function']}", "keys": flatten(root)}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
