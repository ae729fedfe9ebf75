#!/usr/bin/env python3
"""Find file-level module import circles inside each crate of a Rust workspace.

Usage: python3 .ci/import-circles.py [WORKSPACE_ROOT] [--rev=GITREV] [--shallow] [--all-edges] [--max-lines=N]
  --rev=HEAD   analyse a committed revision instead of the working tree (read via git show)
  --shallow    follow re-exports only at crate roots (crate::a::X -> a.rs even if a re-exports X)
  --all-edges  also list every intra-crate file edge
  --brief      one evidence line per edge

For every crate under crates/*/src and bindings/*/src:
  * the module tree is rebuilt from each crate root (src/lib.rs, src/main.rs) by
    following `mod name;` declarations (name.rs / name/mod.rs, inline `mod x {}`);
  * every .rs file is tokenised (comments, doc comments, strings and char
    literals stripped; `#[cfg(test)]` items such as `mod tests {..}` skipped);
  * edges come from `use` trees (incl. `pub use`), and from paths anywhere in the
    code that start with `crate::`, `$crate::`, `super::`, `self::`, a child module
    declared in the current module, a name bound by a `use` of this file, or the
    crate's own library name (main.rs tree -> lib tree); plus uses of a
    `macro_rules!` macro defined in another file.  `mod child;` is not an edge.
  * a path is resolved along the module tree as far as it goes; the next segment
    is an item name.  If the module file does not define that name itself but
    imports / re-exports it (`pub use`, `use`, glob `pub use x::*`), the
    re-export chain is followed to the file that defines it (only for crate roots
    with --shallow).  A name still unresolved at a crate root is looked up by
    grepping the crate for `pub struct|enum|trait|fn|type|const|static|union|mod X`
    / `macro_rules! X`.
  * crate roots that define no items of their own (pure re-export hubs) are not
    graph nodes.
Then Tarjan SCCs of size > 1 are printed per crate with each inner edge and the
source lines that cause it.
"""
import os
import re
import sys
from collections import defaultdict

ITEM_KW = {"struct", "enum", "trait", "fn", "type", "const", "static", "union"}
PATH_HEADS = {"crate", "super", "self"}


# --------------------------------------------------------------------------- lexer
class Tok:
    __slots__ = ("k", "v", "line")

    def __init__(self, k, v, line):
        self.k, self.v, self.line = k, v, line  # k: 'id' | 'p' (punct) | 'lit'

    def __repr__(self):
        return f"{self.v}@{self.line}"


def lex(src):
    toks = []
    i, n, line = 0, len(src), 1
    ident_re = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

    def skip_string(j):  # j points just after opening quote
        nonlocal line
        while j < n:
            c = src[j]
            if c == "\\":
                if j + 1 < n and src[j + 1] == "\n":
                    line += 1
                j += 2
                continue
            if c == "\n":
                line += 1
            if c == '"':
                return j + 1
            j += 1
        return j

    def skip_raw(j):  # j points at 'r'
        nonlocal line
        j += 1
        hashes = 0
        while j < n and src[j] == "#":
            hashes += 1
            j += 1
        assert src[j] == '"'
        j += 1
        end = '"' + "#" * hashes
        k = src.find(end, j)
        if k < 0:
            k = n
        line += src.count("\n", j, k)
        return k + len(end)

    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        if src.startswith("//", i):
            k = src.find("\n", i)
            i = n if k < 0 else k
            continue
        if src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth += 1
                    j += 2
                elif src.startswith("*/", j):
                    depth -= 1
                    j += 2
                else:
                    if src[j] == "\n":
                        line += 1
                    j += 1
            i = j
            continue
        # raw strings r"..", r#".."#, br"..", cr".."
        m = re.match(r'(b|c)?r#*"', src[i:i + 70])
        if m:
            start_line = line
            i = skip_raw(i + (len(m.group(1)) if m.group(1) else 0))
            toks.append(Tok("lit", "str", start_line))
            continue
        if c == '"' or (c in "bc" and i + 1 < n and src[i + 1] == '"'):
            start_line = line
            i = skip_string(i + (1 if c == '"' else 2))
            toks.append(Tok("lit", "str", start_line))
            continue
        if c == "'" or (c == "b" and i + 1 < n and src[i + 1] == "'"):
            j = i + (1 if c == "'" else 2)
            if j < n and src[j] == "\\":  # escaped char literal
                k = j + 2
                while k < n and src[k] != "'":
                    k += 1
                toks.append(Tok("lit", "char", line))
                i = k + 1
                continue
            if j + 1 < n and src[j + 1] == "'":  # 'x'
                toks.append(Tok("lit", "char", line))
                i = j + 2
                continue
            if c == "'":  # lifetime / label
                m = ident_re.match(src, j)
                i = m.end() if m else j
                toks.append(Tok("p", "'", line))
                continue
        if c == "r" and src.startswith("r#", i) and i + 2 < n and (src[i + 2].isalpha() or src[i + 2] == "_"):
            m = ident_re.match(src, i + 2)
            toks.append(Tok("id", m.group(0), line))
            i = m.end()
            continue
        if c == "$" and src.startswith("$crate", i):
            toks.append(Tok("id", "crate", line))
            i += 6
            continue
        if c.isalpha() or c == "_":
            m = ident_re.match(src, i)
            toks.append(Tok("id", m.group(0), line))
            i = m.end()
            continue
        if c.isdigit():
            m = re.compile(r"[0-9][0-9A-Za-z_]*(\.[0-9][0-9A-Za-z_]*)?").match(src, i)
            toks.append(Tok("lit", "num", line))
            i = m.end()
            continue
        if src.startswith("::", i):
            toks.append(Tok("p", "::", line))
            i += 2
            continue
        toks.append(Tok("p", c, line))
        i += 1
    return toks


def match_close(toks, i):
    """toks[i] is an opening bracket; return index of its matching closer."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    stack = []
    j = i
    while j < len(toks):
        v = toks[j].v if toks[j].k == "p" else None
        if v in pairs:
            stack.append(pairs[v])
        elif v in (")", "]", "}"):
            if stack:
                stack.pop()
            if not stack:
                return j
        j += 1
    return len(toks) - 1


def is_cfg_test(toks, i, j):
    """toks[i..j] is an attribute `#[...]`; is it cfg(test) / cfg(all|any(.. test ..))?"""
    vals = [t.v for t in toks[i:j + 1]]
    if "cfg" not in vals:
        return False
    # cfg(test), cfg(all(test, ..)), cfg(any(test, ..)) -- but not cfg(not(test))
    s = " ".join(vals)
    return bool(re.search(r"cfg \( (all \( |any \( )?(\w+ , )*test\b", s)) and "not ( test" not in s


def strip_test_items(toks):
    """Drop items annotated with #[cfg(test)] (with their attributes)."""
    out = []
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        if t.k == "p" and t.v == "#" and i + 1 < n and toks[i + 1].v == "[":
            j = match_close(toks, i + 1)
            if is_cfg_test(toks, i + 1, j):
                # skip further attributes, then the item up to `;` or its `{..}` body
                k = j + 1
                while k < n and toks[k].v == "#" and k + 1 < n and toks[k + 1].v == "[":
                    k = match_close(toks, k + 1) + 1
                while k < n:
                    v = toks[k].v
                    if toks[k].k == "p" and v == ";":
                        break
                    if toks[k].k == "p" and v == "{":
                        k = match_close(toks, k)
                        break
                    if toks[k].k == "p" and v in "([":
                        k = match_close(toks, k)
                    k += 1
                i = k + 1
                continue
        out.append(t)
        i += 1
    return out


# --------------------------------------------------------------------------- parse
class UseLeaf:
    __slots__ = ("segs", "kind", "alias", "line")

    def __init__(self, segs, kind, alias, line):
        self.segs, self.kind, self.alias, self.line = segs, kind, alias, line


def parse_use_tree(toks, i, prefix, leaves):
    """Parse one use-tree starting at toks[i]; return index after it."""
    segs = list(prefix)
    if toks[i].v == "::":  # leading :: (extern crate path)
        segs.append("::")
        i += 1
    while True:
        t = toks[i]
        if t.k == "p" and t.v == "{":
            i += 1
            while toks[i].v != "}":
                i = parse_use_tree(toks, i, segs, leaves)
                if toks[i].v == ",":
                    i += 1
            return i + 1
        if t.k == "p" and t.v == "*":
            leaves.append(UseLeaf(segs, "glob", None, t.line))
            return i + 1
        if t.k == "id":
            segs = segs + [t.v]
            line = t.line
            i += 1
            if toks[i].v == "::":
                i += 1
                continue
            alias = segs[-1]
            if toks[i].k == "id" and toks[i].v == "as":
                alias = toks[i + 1].v
                i += 2
            if segs[-1] == "self":
                segs = segs[:-1]
                alias = alias if alias != "self" else (segs[-1] if segs else None)
            leaves.append(UseLeaf(segs, "name", alias, line))
            return i
        return i + 1  # unexpected token; be forgiving


class ModInfo:
    """One module (file module or inline module)."""

    def __init__(self, path, file):
        self.path = path          # tuple of names from the crate root
        self.file = file          # file that holds it
        self.children = {}        # name -> module path tuple
        self.items = set()        # names defined here
        self.uses = {}            # local name -> (abs segs, line)
        self.globs = []           # [(abs segs, line)]


class FileInfo:
    def __init__(self, path, rel, toks, lines):
        self.path, self.rel, self.toks, self.lines = path, rel, toks, lines
        self.modpath = None
        self.has_defs = False
        self.macros = set()


# --------------------------------------------------------------------------- sources
class Source:
    """Working tree (rev=None) or a git revision (read with `git show`, read-only)."""

    def __init__(self, ws, rev=None):
        self.ws, self.rev = ws, rev
        self._listing = None
        if rev:
            import subprocess
            out = subprocess.run(["git", "-C", ws, "ls-tree", "-r", "--name-only", rev],
                                 check=True, capture_output=True, text=True).stdout
            self._listing = [os.path.join(ws, l) for l in out.splitlines()]

    def read(self, path):
        if not self.rev:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        import subprocess
        r = subprocess.run(["git", "-C", self.ws, "show", f"{self.rev}:{os.path.relpath(path, self.ws)}"],
                           capture_output=True, text=True)
        if r.returncode:
            raise OSError(path)
        return r.stdout

    def rs_files(self, d):
        if not self.rev:
            return sorted(os.path.join(dp, fn) for dp, _, fns in os.walk(d) for fn in fns if fn.endswith(".rs"))
        return sorted(p for p in self._listing if p.startswith(d + os.sep) and p.endswith(".rs"))

    def crate_dirs(self):
        out = []
        for grp in ("crates", "bindings"):
            g = os.path.join(self.ws, grp)
            if not self.rev:
                if os.path.isdir(g):
                    out += [os.path.join(g, c) for c in sorted(os.listdir(g)) if os.path.isdir(os.path.join(g, c, "src"))]
            else:
                cs = {p[len(g) + 1:].split(os.sep)[0] for p in self._listing
                      if p.startswith(g + os.sep) and p[len(g) + 1:].count(os.sep) >= 2
                      and p[len(g) + 1:].split(os.sep)[1] == "src"}
                out += [os.path.join(g, c) for c in sorted(cs)]
        return out


SOURCE = None


# --------------------------------------------------------------------------- crate
class Crate:
    def __init__(self, root_dir, ws, shallow):
        self.dir = root_dir
        self.ws = ws
        self.shallow = shallow
        self.name = os.path.relpath(root_dir, ws)
        self.src = os.path.join(root_dir, "src")
        self.files = {}    # abs path -> FileInfo
        self.trees = {}    # root-name ('lib'/'main') -> {modpath: ModInfo}
        self.file_tree = {}  # file -> tree key
        self.libname = self._lib_name()
        self.warnings = []
        for p in SOURCE.rs_files(self.src):
            try:
                text = SOURCE.read(p)
            except OSError:  # vanished while we ran (tree being edited)
                self.warnings.append(f"{os.path.relpath(p, ws)}: vanished while reading (skipped)")
                continue
            toks = strip_test_items(lex(text))
            self.files[p] = FileInfo(p, os.path.relpath(p, ws), toks, text.split("\n"))

    def _lib_name(self):
        try:
            cargo = SOURCE.read(os.path.join(self.dir, "Cargo.toml"))
        except OSError:
            return None
        m = re.search(r"^\[lib\][^\[]*?^name\s*=\s*\"([^\"]+)\"", cargo, re.M | re.S)
        if m:
            return m.group(1)
        m = re.search(r"^\[package\][^\[]*?^name\s*=\s*\"([^\"]+)\"", cargo, re.M | re.S)
        return m.group(1).replace("-", "_") if m else None

    # ---- module tree
    def build(self):
        self.pending_uses = []
        for key in ("lib", "main"):
            root = os.path.join(self.src, key + ".rs")
            if root in self.files:
                self.trees[key] = {}
                self._load_file(key, root, ())
        for key, modpath, leaves in self.pending_uses:
            mod = self.trees[key][modpath]
            for lf in leaves:
                ab = self.absolutize(key, modpath, lf.segs)
                if lf.kind == "glob":
                    if ab is not None:
                        mod.globs.append((ab, lf.line))
                elif lf.alias and lf.alias != "_":
                    # None = imported from another crate (or unresolvable): not an intra-crate edge
                    mod.uses[lf.alias] = (ab, lf.line)
        for f in self.files.values():
            if f.modpath is None:
                self.warnings.append(f"{f.rel}: not reachable from any crate root (ignored)")

    def _load_file(self, key, path, modpath):
        f = self.files.get(path)
        if f is None:
            self.warnings.append(f"missing module file {path}")
            return
        if f.modpath is not None:
            self.warnings.append(f"{f.rel} is part of several module trees; using the first")
            return
        f.modpath = modpath
        self.file_tree[path] = key
        base = os.path.basename(path)
        if base in ("mod.rs", "lib.rs", "main.rs"):
            childdir = os.path.dirname(path)
        else:
            childdir = path[:-3]
        tree = self.trees[key]
        tree[modpath] = ModInfo(modpath, path)
        self._scan_items(key, f, 0, len(f.toks), modpath, childdir, top=True)

    def _scan_items(self, key, f, i, end, modpath, childdir, top):
        """Scan one module body toks[i:end]: mods, items, use trees (depth 0 only)."""
        tree = self.trees[key]
        mod = tree[modpath]
        toks = f.toks
        depth = 0
        while i < end:
            t = toks[i]
            if t.k == "p" and t.v in "{([":
                # skip bodies; nested inline `mod` are handled when seen at depth 0
                i = match_close(toks, i) + 1
                continue
            if t.k != "id":
                i += 1
                continue
            prev = toks[i - 1].v if i > 0 else None
            if t.v == "mod" and i + 1 < end and toks[i + 1].k == "id" and prev != "::":
                name = toks[i + 1].v
                nxt = toks[i + 2].v if i + 2 < end else None
                child = modpath + (name,)
                mod.children[name] = child
                mod.items.add(name)
                if nxt == ";":
                    cand = [os.path.join(childdir, name + ".rs"), os.path.join(childdir, name, "mod.rs")]
                    for c in cand:
                        if c in self.files:
                            self._load_file(key, c, child)
                            break
                    else:
                        self.warnings.append(f"{f.rel}: `mod {name};` file not found")
                    i += 3
                    continue
                if nxt == "{":
                    j = match_close(toks, i + 2)
                    tree[child] = ModInfo(child, f.path)
                    self._scan_items(key, f, i + 3, j, child, os.path.join(childdir, name), top=False)
                    i = j + 1
                    continue
            if t.v == "use" and prev not in ("::",):
                leaves = []
                j = parse_use_tree(toks, i + 1, [], leaves)
                self.pending_uses.append((key, modpath, leaves))
                while j < end and toks[j].v != ";":
                    j += 1
                i = j + 1
                continue
            if t.v in ITEM_KW and i + 1 < end and toks[i + 1].k == "id" and prev not in ("::", ".", "&", "*", "'"):
                nm = toks[i + 1].v
                if not (t.v == "fn" and prev in ("(", ",", "<", ":", "->", "=")) and nm not in ("mut",):
                    mod.items.add(nm)
                    f.has_defs = True
            if t.v == "macro_rules" and i + 2 < end and toks[i + 1].v == "!" and toks[i + 2].k == "id":
                mod.items.add(toks[i + 2].v)
                f.macros.add(toks[i + 2].v)
                f.has_defs = True
            if t.v == "impl" and prev != "::":
                f.has_defs = True
            i += 1

    # ---- path handling
    def absolutize(self, key, modpath, segs):
        """Turn a path (as written in module `modpath`) into ('tree', abs segs) or None."""
        if not segs:
            return None
        s0 = segs[0]
        tree = self.trees[key]
        if s0 == "::":
            return None
        if s0 == "crate":
            return (key, tuple(segs[1:]))
        if s0 in ("self", "super"):
            cur = list(modpath)
            k = 0
            while k < len(segs) and segs[k] in ("self", "super"):
                if segs[k] == "super":
                    if not cur:
                        return None
                    cur.pop()
                k += 1
            return (key, tuple(cur) + tuple(segs[k:]))
        if self.libname and s0 == self.libname and key != "lib" and "lib" in self.trees:
            return ("lib", tuple(segs[1:]))
        mod = tree.get(tuple(modpath))
        if mod is not None and s0 in mod.children:
            return (key, tuple(modpath) + tuple(segs))
        return None

    def resolve(self, ab, depth=0, via=None):
        """abs path -> (file, via-list) of the file defining the final item/module."""
        via = via or []
        key, segs = ab
        tree = self.trees[key]
        cur = ()
        i = 0
        while i < len(segs) and cur + (segs[i],) in tree:
            cur = cur + (segs[i],)
            i += 1
        mod = tree[cur]
        if i == len(segs):
            return mod.file, via
        name = segs[i]
        if name in mod.items or depth > 12:
            return mod.file, via
        is_root = cur == ()
        follow = (not self.shallow) or is_root
        if follow and name in mod.uses:
            tgt, line = mod.uses[name]
            if tgt is None:
                return None, via
            if tgt[1] != ab[1] or tgt[0] != key:
                v = via + [f"{os.path.relpath(mod.file, self.src)}:{line}"]
                return self.resolve((tgt[0], tgt[1] + tuple(segs[i + 1:])), depth + 1, v)
        if follow:
            for g, line in mod.globs:
                gm = self.trees[g[0]].get(g[1])
                if gm is not None and (name in gm.items or (name in gm.uses and gm.uses[name][0] is not None)):
                    v = via + [f"{os.path.relpath(mod.file, self.src)}:{line}"]
                    return self.resolve((g[0], g[1] + (name,) + tuple(segs[i + 1:])), depth + 1, v)
        if is_root:
            hits = self.grep_def(key, name)
            if len(hits) == 1:
                return hits[0], via + ["grep"]
            if len(hits) > 1:
                self.warnings.append(f"ambiguous definition of `{name}` in {[self.files[h].rel for h in hits]}")
        return mod.file, via

    def grep_def(self, key, name):
        pat = re.compile(r"^\s*pub(\([^)]*\))?\s+(async\s+|unsafe\s+|const\s+)*(struct|enum|trait|fn|type|const|static|union|mod)\s+"
                         + re.escape(name) + r"\b|macro_rules!\s*" + re.escape(name) + r"\b", re.M)
        hits = []
        for p, f in self.files.items():
            if self.file_tree.get(p) != key:
                continue
            if any(pat.search(l) for l in f.lines):
                hits.append(p)
        return hits

    # ---- edges
    def edges(self):
        """Return {(src, dst): [(line_no, via)]}."""
        E = defaultdict(list)
        crate_macros = {}
        for p, f in self.files.items():
            for m in f.macros:
                crate_macros.setdefault(m, p)
        for p, f in self.files.items():
            if f.modpath is None:
                continue
            key = self.file_tree[p]
            self._file_edges(f, key, E, crate_macros)
        return E

    def _file_edges(self, f, key, E, crate_macros):
        toks = f.toks
        tree = self.trees[key]
        # map token index -> module path (inline mods)
        mods_at = self._inline_mod_ranges(f, key)

        def modpath_at(i):
            best = f.modpath
            for (a, b, mp) in mods_at:
                if a <= i <= b and len(mp) > len(best):
                    best = mp
            return best

        def add(ab, line, base_target=None, reexport=False):
            if ab is None or ab[1] is None:
                return
            tgt, via = self.resolve(ab)
            if tgt is None or tgt == f.path or tgt == base_target:
                return
            E[(f.path, tgt)].append((line, via, reexport))

        n = len(toks)
        # identifiers used outside `use ...;` statements (a `pub use x::Y` whose Y is
        # also used by the file's own code is a real dependency, not just a re-export)
        used_ids = set()
        variant_idx = set()  # enum variant names are definitions, not uses
        for i in range(n - 2):
            if toks[i].v == "enum" and toks[i + 1].k == "id":
                j = i + 2
                while j < n and toks[j].v not in ("{", ";"):
                    j += 1
                if j < n and toks[j].v == "{":
                    end, d = match_close(toks, j), 0
                    for k in range(j, end):
                        v = toks[k].v
                        if toks[k].k == "p" and v in "{([":
                            d += 1
                        elif toks[k].k == "p" and v in "})]":
                            d -= 1
                        elif d == 1 and toks[k].k == "id" and toks[k - 1].v in ("{", ",", "]"):
                            variant_idx.add(k)
        i = 0
        while i < n:
            if toks[i].k == "id" and toks[i].v == "use" and (i == 0 or toks[i - 1].v != "::"):
                while i < n and toks[i].v != ";":
                    i += 1
            elif toks[i].k == "id" and i not in variant_idx and (i == 0 or toks[i - 1].v not in ("::", ".")):
                used_ids.add(toks[i].v)
            i += 1
        i = 0
        while i < n:
            t = toks[i]
            prev = toks[i - 1].v if i > 0 else None
            if t.k == "id" and t.v == "use" and prev != "::":
                mp = modpath_at(i)
                # `pub use` / `pub(crate) use` = re-export
                k = i - 1
                if k >= 0 and toks[k].v == ")":
                    while k >= 0 and toks[k].v != "(":
                        k -= 1
                    k -= 1
                reexp = k >= 0 and toks[k].v == "pub"
                leaves = []
                j = parse_use_tree(toks, i + 1, [], leaves)
                for lf in leaves:
                    ab = self.absolutize(key, mp, lf.segs)
                    if ab is None:
                        continue
                    if lf.kind == "glob":
                        gm = self.trees[ab[0]].get(ab[1])
                        tgt = gm.file if gm else self.resolve(ab)[0]
                        if tgt != f.path:
                            E[(f.path, tgt)].append((lf.line, ["glob"], reexp))
                    else:
                        add(ab, lf.line, reexport=reexp and lf.alias not in used_ids)
                while j < n and toks[j].v != ";":
                    j += 1
                i = j + 1
                continue
            if t.k == "id" and prev != "::" and prev != "." and i + 1 < n and toks[i + 1].v == "::" \
                    and not (prev == "mod"):
                # collect path segments
                segs = [t.v]
                j = i + 1
                while j + 1 < n and toks[j].v == "::" and toks[j + 1].k == "id":
                    segs.append(toks[j + 1].v)
                    j += 2
                mp = modpath_at(i)
                ab = self.absolutize(key, mp, segs)
                base = None
                if ab is None:
                    # a name bound by a `use` in this module (e.g. `use crate::search;`)
                    mod = tree.get(mp)
                    if mod is not None and segs[0] in mod.uses and mod.uses[segs[0]][0] is not None:
                        tgt_ab, _ = mod.uses[segs[0]]
                        base = self.resolve(tgt_ab)[0]
                        ab = (tgt_ab[0], tgt_ab[1] + tuple(segs[1:]))
                if ab is not None:
                    add(ab, t.line, base_target=base)
                i = j
                continue
            if t.k == "id" and i + 1 < n and toks[i + 1].v == "!" and prev != "macro_rules" and t.v in crate_macros:
                src = crate_macros[t.v]
                if src != f.path and prev != "::":
                    E[(f.path, src)].append((t.line, ["macro"], False))
            i += 1

    def _inline_mod_ranges(self, f, key):
        out = []
        toks = f.toks

        def scan(i, end, mp):
            while i < end:
                t = toks[i]
                if t.k == "id" and t.v == "mod" and i + 2 < end and toks[i + 1].k == "id" and toks[i + 2].v == "{":
                    j = match_close(toks, i + 2)
                    child = mp + (toks[i + 1].v,)
                    out.append((i + 2, j, child))
                    scan(i + 3, j, child)
                    i = j + 1
                    continue
                if t.k == "p" and t.v in "{([":
                    # inline mods only at module level, but fn bodies may hold them too; descend cheaply
                    i += 1
                    continue
                i += 1
        scan(0, len(toks), f.modpath)
        return out


# --------------------------------------------------------------------------- graph
def tarjan(nodes, adj):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def sc(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                sc(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in nodes:
        if v not in index:
            sc(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    shallow = "--shallow" in sys.argv
    show_all = "--all-edges" in sys.argv
    max_lines = 6
    brief = "--brief" in sys.argv
    for a in sys.argv[1:]:
        if a.startswith("--max-lines="):
            max_lines = int(a.split("=", 1)[1])
    rev = None
    for a in sys.argv[1:]:
        if a.startswith("--rev="):
            rev = a.split("=", 1)[1]
    ws = os.path.abspath(args[0] if args else "/work/main")
    global SOURCE
    SOURCE = Source(ws, rev)
    crate_dirs = SOURCE.crate_dirs()
    out = []
    summary = []
    total = 0
    for cd in crate_dirs:
        cr = Crate(cd, ws, shallow)
        cr.build()
        E = cr.edges()
        roots = {os.path.join(cr.src, "lib.rs"), os.path.join(cr.src, "main.rs")}
        hubs = {r for r in roots if r in cr.files and not cr.files[r].has_defs}
        adj = defaultdict(set)
        for (a, b) in E:
            if a in hubs or b in hubs:
                continue
            adj[a].add(b)
        nodes = sorted(p for p in cr.files if p not in hubs)
        sccs = [sorted(c) for c in tarjan(nodes, adj) if len(c) > 1]
        sccs.sort(key=lambda c: (-len(c), c))
        # same graph without edges caused only by `pub use` re-export lines
        reexport_only = {e for e, ev in E.items() if all(r for _, _, r in ev)}
        adj2 = {a: {b for b in bs if (a, b) not in reexport_only} for a, bs in adj.items()}
        sccs2 = [sorted(c) for c in tarjan(nodes, adj2) if len(c) > 1]
        sccs2.sort(key=lambda c: (-len(c), c))
        nedges = sum(1 for (a, b) in E if a not in hubs and b not in hubs)
        hdr = f"== {cr.name}  ({len(cr.files)} files, {nedges} intra-crate file edges"
        hdr += f", hub roots skipped: {', '.join(os.path.basename(h) for h in sorted(hubs)) or '-'})"
        out.append(hdr)
        for w in sorted(set(cr.warnings)):
            out.append(f"   note: {w}")
        if show_all:
            for (a, b) in sorted(E):
                out.append(f"   edge {cr.files[a].rel} -> {cr.files[b].rel}")
        rel = lambda p, cr=cr: os.path.relpath(p, cr.src)
        if sccs:
            summary.append(f"  {cr.name}: " + " | ".join("{" + ", ".join(rel(p) for p in c) + "}" for c in sccs))
            if [set(c) for c in sccs2] != [set(c) for c in sccs]:
                summary.append("      without pub-use re-export edges: "
                               + (" | ".join("{" + ", ".join(rel(p) for p in c) + "}" for c in sccs2) or "none"))
        if not sccs:
            out.append("   no circles")
        for k, comp in enumerate(sccs, 1):
            total += 1
            cs = set(comp)
            out.append(f"   circle {k}: {len(comp)} files: {', '.join(rel(p) for p in comp)}")
            for a in comp:
                for b in sorted(adj[a]):
                    if b not in cs:
                        continue
                    ev = E[(a, b)]
                    seen = {}
                    for line, via, _ in ev:
                        seen.setdefault(line, via)
                    tag = "   (pub-use re-export only)" if (a, b) in reexport_only else ""
                    if brief:
                        line, via = sorted(seen.items())[0]
                        more = f" (+{len(seen) - 1})" if len(seen) > 1 else ""
                        txt = cr.files[a].lines[line - 1].strip()
                        txt = txt[:70] + "..." if len(txt) > 73 else txt
                        v = f" [via {', '.join(via)}]" if via else ""
                        out.append(f"     {rel(a)} -> {rel(b)}{' [re-export]' if tag else ''}  :{line}{more} {txt}{v}")
                        continue
                    out.append(f"     {rel(a)} -> {rel(b)}{tag}")
                    for m, (line, via) in enumerate(sorted(seen.items())):
                        if m >= max_lines:
                            out.append(f"         ... +{len(seen) - max_lines} more line(s)")
                            break
                        text = cr.files[a].lines[line - 1].strip()
                        if len(text) > 110:
                            text = text[:107] + "..."
                        note = ""
                        if via:
                            note = "   [via " + ", ".join(via) + "]"
                        out.append(f"         {cr.files[a].rel}:{line}: {text}{note}")
    out.append("\nSUMMARY")
    out.extend(summary)
    out.append(f"source: {ws} " + (f"at git revision {rev}" if rev else "(working tree)"))
    out.append(f"TOTAL circles: {total}  (mode: {'shallow (re-exports followed only at crate roots)' if shallow else 'deep (re-exports followed to the defining file)'})")
    print("\n".join(out))
    return total


if __name__ == "__main__":
    # Exits 1 when a crate has an import circle (what `.ci/run` checks).
    sys.exit(1 if main() else 0)
