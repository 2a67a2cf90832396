"""Map lines of Amaranth's generated Verilog back to the Amaranth source lines they came from.

Amaranth writes ``(* src = "hdl/....py:123" *)`` attributes (when converted with
``emit_src=True``): before a signal's declaration and a clocked process, and inline in a
continuous assignment (``assign x = a ? (* src = "..." *) b : c;``). Yosys's combinational
processes (``always @*`` for an ``Array`` read or a ``Switch``) carry none: a line there is
given the source of the signal it drives, found through the line that drives or reads that
signal. So every line of a process, declaration or assignment gets a location.

Example::

    lines = src_lines(Path("build/coverage/code/router.v").read_text())
    lines[2134]  # 'hdl/link/router.py:163'
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

__all__ = ["src_lines", "location", "YOSYS_DUMMY"]

#: The never-true ``if`` Yosys writes at the top of each ``always @*`` (so that simulators
#: run the process once at time 0): its coverage points are not the design's.
YOSYS_DUMMY = "verilog_backend.cc"

_SRC = re.compile(r'\(\*\s*src\s*=\s*"([^"]*)"\s*\*\)')
_ATTR = re.compile(r"\(\*.*?\*\)")
_ATTR_LINE = re.compile(r"^\s*(\(\*.*?\*\)\s*)+$")
_MODULE = re.compile(r"^\s*module\s")
_ENDMODULE = re.compile(r"^\s*endmodule\b")
_PROCESS = re.compile(r"^\s*(always|initial)\b")
_IDENT = re.compile(r"\\\S+|[A-Za-z_][\w$]*")
_LITERAL = re.compile(r"\d*'[sS]?[bodhBODH][0-9a-fA-FxzXZ_?]+")
_STRING = re.compile(r'"[^"]*"')
_DECL = re.compile(
    r"^\s*(?:input|output|inout|wire|reg)\b(?:\s+signed)?(?:\s*\[[^\]]*\])?\s*(\\\S+|[A-Za-z_][\w$]*)"
)
_INDEX = r"\[(?:[^\[\]]|\[[^\]]*\])*\]"  # one level of nesting: buffer[\$2 [1:0]]
_TARGET = re.compile(rf"^\s*(?:assign\s+)?(\\\S+|[A-Za-z_][\w$]*)\s*(?:{_INDEX}\s*)*(?:<=|=)(?!=)")
_KEYWORDS = frozenset(
    "always assign begin case casez casex default else end endcase if initial posedge negedge "
    "or reg wire input output inout signed module endmodule".split()
)

_SITE = "/site-packages/"


def location(src: str, root: Path | None = None) -> str:
    """One ``src`` attribute as a short location: the first of Yosys's ``|``-joined ones,
    relative to ``root`` (the project) when under it, to ``site-packages`` for a library."""
    first = src.split("|")[0].strip()
    path, _, line = first.rpartition(":")
    if not path:  # no line number
        path, line = first, ""
    if ":" in path and re.fullmatch(r"\d+(\.\d+)?", path.rpartition(":")[2] or ""):
        path = path.rpartition(":")[0]  # Yosys's file:line.col-line.col spans
    line = line.split(".")[0].split("-")[0]
    if root is not None:
        try:
            path = Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    if _SITE in path:
        path = path.split(_SITE, 1)[1]
    return f"{path}:{line}" if line else path


def _name(token: str) -> str:
    return token[1:] if token.startswith("\\") else token


def _identifiers(code: str) -> set[str]:
    code = _STRING.sub(" ", _LITERAL.sub(" ", _ATTR.sub(" ", code)))
    return {_name(t) for t in _IDENT.findall(code)} - _KEYWORDS


_CONDITION = re.compile(
    r"^\s*(?:end\s+)?(?:else\s+)?(?:if|casez|casex|case)\s*\(\s*(\\\S+|[A-Za-z_][\w$]*)"
)
_INSTANCE = re.compile(r"^\s*(\\\S+|[A-Za-z_][\w$]*)\s+(\\\S+|[A-Za-z_][\w$]*)\s*\(\s*$")


class _Module:
    """What one module's text says about its lines and signals."""

    def __init__(self):
        self.own: dict[int, str] = {}  # line -> src written on or just above it
        self.inherited: dict[int, str] = {}  # line -> src of the process or instance it is in
        self.decl: dict[str, str] = {}  # signal -> src of its declaration
        self.decl_line: dict[int, str] = {}  # declaration line -> signal
        self.ports: set[str] = set()
        self.condition: dict[int, str] = {}  # if/case line -> the signal it tests
        self.targets: dict[int, set[str]] = defaultdict(set)  # line -> signals it drives
        self.drivers: dict[str, list[int]] = defaultdict(list)
        self.readers: dict[str, list[int]] = defaultdict(list)
        self.lines: list[int] = []

    def src_at(self, line: int) -> str | None:
        return self.own.get(line) or self.inherited.get(line)

    def src_of_signal(self, name: str, accept) -> str | None:
        """A signal's source that ``accept`` takes: its declaration's, else its driver's,
        else a reader's, through the signals those readers drive, breadth first."""
        queue, seen = [name], set()
        while queue:
            signal = queue.pop(0)
            if signal in seen:
                continue
            seen.add(signal)
            if accept(self.decl.get(signal)):
                return self.decl[signal]
            for line in self.drivers.get(signal, []) + self.readers.get(signal, []):
                if accept(self.src_at(line)):
                    return self.src_at(line)
            for line in self.readers.get(signal, []):
                queue.extend(self.targets.get(line, ()))
        return None

    def src_of_line(self, number: int, accept) -> str | None:
        """A line's source that ``accept`` takes: its own; for an ``if`` or ``case``, that of
        the expression it tests (Amaranth's ``m.If`` condition carries its line), or of the
        signal it tests unless a port; the process or instance it is in; else that of the
        signal it declares or drives."""
        if accept(self.own.get(number)):
            return self.own[number]
        tested = self.condition.get(number)
        for line in self.drivers.get(tested, []):
            if accept(self.src_at(line)):
                return self.src_at(line)
        if tested not in self.ports and accept(self.decl.get(tested)):
            return self.decl[tested]  # a named condition (a Signal() the m.If tests)
        if accept(self.inherited.get(number)):
            return self.inherited[number]
        names = [self.decl_line[number]] if number in self.decl_line else []
        for name in names + sorted(self.targets.get(number, ())):
            src = self.src_of_signal(name, accept)
            if src is not None:
                return src
        return None


def src_lines(text: str, root: Path | None = None) -> dict[int, str]:
    """Amaranth source location (``hdl/link/router.py:163``) of every line of ``text`` (the
    generated Verilog) that has one, by line number from 1; paths relative to ``root``."""
    modules: list[_Module] = []
    module: _Module | None = None
    pending: list[str] = []
    block: dict | None = None  # the process or instance being read
    blocks: list[dict] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if _MODULE.match(line):
            module = _Module()
            modules.append(module)
            pending = []
            continue
        if module is None:
            continue
        if _ENDMODULE.match(line):
            module = None
            continue
        if _ATTR_LINE.match(line):
            pending += _SRC.findall(line)
            continue
        inline = _SRC.findall(line)
        src = (inline or pending or [None])[0]
        pending = []
        code = _ATTR.sub(" ", line)
        module.lines.append(number)
        if block is None and (_PROCESS.match(code) or _INSTANCE.match(code)):
            kind = "process" if _PROCESS.match(code) else "instance"
            block = {"module": module, "kind": kind, "lines": [], "src": src, "depth": 0}
            block["open"] = False
            blocks.append(block)
        elif src is not None:
            module.own[number] = src
        if block is not None:
            b = block
            b["lines"].append(number)
            if b["kind"] == "instance":
                if ");" in code:
                    block = None
            else:
                b["depth"] += len(re.findall(r"\bbegin\b", code))
                b["depth"] -= len(re.findall(r"\bend\b", code))
                b["open"] = b["open"] or b["depth"] > 0
                # a process is one statement: a begin ... end, or up to its first semicolon
                if (b["open"] and b["depth"] <= 0) or (
                    not b["open"] and code.rstrip().endswith(";")
                ):
                    block = None
        condition = _CONDITION.match(code)
        if condition:
            module.condition[number] = _name(condition.group(1))
        decl = _DECL.match(code)
        if decl:
            name = _name(decl.group(1))
            module.decl_line[number] = name
            if re.match(r"\s*(input|output|inout)\b", code):
                module.ports.add(name)
            if src is not None:
                module.decl.setdefault(name, src)
            continue
        target = _TARGET.match(code)
        used = _identifiers(code)
        if target:
            name = _name(target.group(1))
            module.targets[number].add(name)
            module.drivers[name].append(number)
            used.discard(name)
        for name in used:
            module.readers[name].append(number)
    for b in blocks:  # a process's lines drive what any of them drives
        m = b["module"]
        if b["kind"] == "process":
            targets = set().union(*(m.targets.get(n, set()) for n in b["lines"]))
            for n in b["lines"]:
                m.targets[n] |= targets
        if b["src"] is not None:
            for n in b["lines"]:
                m.inherited[n] = b["src"]

    def anywhere(src):
        return src is not None

    def in_project(src):  # Amaranth's own library lines (an enum's ==) say less than ours
        return src is not None and _SITE not in src and (root is None or _under(src, root))

    out: dict[int, str] = {}
    for m in modules:
        for number in m.lines:
            src = m.src_of_line(number, in_project) or m.src_of_line(number, anywhere)
            if src is not None:
                out[number] = location(src, root)
    return out


def _under(src: str, root: Path) -> bool:
    path = src.split("|")[0].rpartition(":")[0]
    try:
        Path(path).resolve().relative_to(Path(root).resolve())
    except ValueError:
        return False
    return True
