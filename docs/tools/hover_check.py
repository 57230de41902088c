"""Ask yaml-language-server for the hover text of every field of some specs.

Starts ``yaml-language-server --stdio`` (the server editors run), gives it the
schema ``attngraph schema`` writes, opens each spec and asks hover at every key
that is a field of the spec language: the document's, an input's, a block's,
``train:``'s, every node's (``kind`` included), and those of nested mappings
(``mask``, ``carry`` and ``feed`` entries, long references, learned queries).
Names the user chooses (node ids, dims, input names) are not fields and are left
out. A field passes when the hover shows its description from the schema.

    python docs/tools/hover_check.py specs/*.yaml
    python docs/tools/hover_check.py --every-field specs mechanisms \
        --server /tmp/yls/node_modules/.bin/yaml-language-server

``--every-field`` adds a document written from the schema that holds every field
of every model (every kind once, each nested model in place), so that no field
goes unchecked for want of an example; its values are samples, so the server's
complaints about them are not counted (in the specs given, they are misses). It
prints ``N of M fields show their description on hover`` (and each miss), and
exits 1 when one does not. The server is ``--server``, else
``$YAML_LANGUAGE_SERVER``, else ``yaml-language-server`` on the PATH (``npm install
-g yaml-language-server``); it needs ``node``. Run it from the repository root, in
the environment attngraph is installed in.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Field:
    """One field key in a spec: where it is and what the schema says it means."""

    file: Path
    line: int  # 0-based, as LSP counts
    col: int
    name: str
    description: str
    #: the model it belongs to: its name under $defs ("" for the document)
    owner: str


def server_command(given: str | None) -> list[str] | None:
    """The command that starts the server over stdio, or None if there is none."""
    exe = given or os.environ.get("YAML_LANGUAGE_SERVER") or shutil.which(
        "yaml-language-server")
    if not exe or shutil.which("node") is None or not Path(exe).exists() and not shutil.which(exe):
        return None
    return [exe, "--stdio"]


def _resolve(schema: dict[str, Any], sub: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in sub:
        sub = schema["$defs"][sub["$ref"].rsplit("/", 1)[1]]
    return sub


def _branch(schema: dict[str, Any], sub: dict[str, Any], node: yaml.Node) -> dict[str, Any]:
    """The schema of ``node``: ``sub`` itself or the branch of its union that fits
    (by ``kind`` for nodes, by the keys for the rest)."""
    sub = _resolve(schema, sub)
    branches = [_resolve(schema, b) for b in sub.get("anyOf", sub.get("oneOf", []))]
    if not branches:
        return sub
    if isinstance(node, yaml.MappingNode):
        keys = {k.value for k, _ in node.value}
        kind = next((v.value for k, v in node.value if k.value == "kind"), None)
        for b in branches:
            props = b.get("properties", {})
            if "kind" in props and props["kind"].get("const") == kind:
                return b
        for b in branches:
            if b.get("type") == "object" and keys <= set(b.get("properties", keys)):
                return b
    return next((b for b in branches if b.get("type") != "object"), sub)


def _sample(schema: dict[str, Any], sub: dict[str, Any], depth: int = 0,
            made: set[int] | None = None) -> Any:
    """A value of ``sub`` that writes every field of every model inside it (of a union
    of models, one not written yet: ``made`` holds those written)."""
    made = set() if made is None else made
    sub = _resolve(schema, sub)
    branches = [_resolve(schema, b) for b in sub.get("anyOf", sub.get("oneOf", []))]
    if branches:
        models = [b for b in branches if "properties" in b]
        pick = next((b for b in models if id(b) not in made), (models or branches)[0])
        return _sample(schema, pick, depth, made)
    if "properties" in sub:
        made.add(id(sub))
        return {k: _sample(schema, v, depth + 1, made) for k, v in sub["properties"].items()}
    names = next(iter(sub.get("patternProperties", {}).values()), None)
    if names is not None:
        every = [_resolve(schema, b) for b in _resolve(schema, names).get("oneOf", [])]
        if every and depth < 3:  # a node of each kind (not again inside blocks' blocks)
            return {f"n{i}": _sample(schema, b, depth + 1, made) for i, b in enumerate(every)}
        return {"a": _sample(schema, names, depth + 1, made)}
    if "items" in sub:
        return [_sample(schema, sub["items"], depth + 1, made)]
    if "prefixItems" in sub:
        return [_sample(schema, x, depth + 1, made) for x in sub["prefixItems"]]
    if sub.get("default") is not None:
        return sub["default"]
    if "const" in sub or "enum" in sub:
        return sub.get("const", (sub.get("enum") or [None])[0])
    return {"integer": 1, "number": 1.0, "boolean": True, "string": "a"}.get(
        sub.get("type", "string"), "a")


def every_field_spec(schema: dict[str, Any]) -> str:
    """A YAML document holding every field of every model of ``schema`` (sample values:
    it is for hovering, not a spec that validates)."""
    return yaml.safe_dump(_sample(schema, schema), sort_keys=False, allow_unicode=True)


def fields(schema: dict[str, Any], path: Path) -> Iterator[Field]:
    """Every field key of the spec at ``path``, with the description the schema gives."""
    root = yaml.compose(path.read_text(encoding="utf-8"))
    owners = {id(d): name for name, d in schema.get("$defs", {}).items()} | {id(schema): ""}

    def walk(node: yaml.Node, sub: dict[str, Any]) -> Iterator[Field]:
        sub = _branch(schema, sub, node)
        if isinstance(node, yaml.MappingNode):
            props = sub.get("properties")
            names = next(iter(sub.get("patternProperties", {}).values()), None) or \
                sub.get("additionalProperties")
            for key, value in node.value:
                if props is not None and key.value in props:
                    prop = props[key.value]
                    yield Field(path, key.start_mark.line, key.start_mark.column, key.value,
                                prop.get("description", ""), owners.get(id(sub), "?"))
                    yield from walk(value, prop)
                elif isinstance(names, dict):
                    yield from walk(value, names)
        elif isinstance(node, yaml.SequenceNode) and isinstance(sub.get("items"), dict):
            for item in node.value:
                yield from walk(item, sub["items"])

    if root is not None:
        yield from walk(root, schema)


class Client:
    """A minimal LSP client: JSON-RPC over the server's stdin and stdout."""

    def __init__(self, cmd: list[str], settings: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.settings = settings
        self.next_id = 0
        self.replies: dict[int, Any] = {}
        self.diagnostics: dict[str, list[Any]] = {}  # by document uri
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _send(self, msg: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **msg}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            msg = json.loads(out.read(length))
            if "method" in msg and "id" in msg:  # the server asks the client
                self._answer(msg)
            elif msg.get("method") == "textDocument/publishDiagnostics":
                with self.cond:
                    self.diagnostics[msg["params"]["uri"]] = msg["params"]["diagnostics"]
                    self.cond.notify_all()
            elif "id" in msg:
                with self.cond:
                    self.replies[msg["id"]] = msg
                    self.cond.notify_all()

    def _answer(self, msg: dict[str, Any]) -> None:
        if msg["method"] == "workspace/configuration":
            result: Any = [self.settings.get(i.get("section", ""), None)
                           for i in msg["params"]["items"]]
        else:  # registerCapability, workDoneProgress/create, ...
            result = None
        self._send({"id": msg["id"], "result": result})

    def request(self, method: str, params: dict[str, Any], timeout: float = 60.0) -> Any:
        self.next_id += 1
        rid = self.next_id
        self._send({"id": rid, "method": method, "params": params})
        with self.cond:
            if not self.cond.wait_for(lambda: rid in self.replies, timeout):
                msg = f"no reply to {method} in {timeout:g} s"
                raise TimeoutError(msg)
            reply = self.replies.pop(rid)
        if "error" in reply:
            msg = f"{method}: {reply['error']}"
            raise RuntimeError(msg)
        return reply.get("result")

    def validated(self, uri: str, timeout: float = 60.0) -> list[Any]:
        """Wait for the server's diagnostics of ``uri`` (it has then read the schema)."""
        with self.cond:
            if not self.cond.wait_for(lambda: uri in self.diagnostics, timeout):
                msg = f"no diagnostics for {uri} in {timeout:g} s"
                raise TimeoutError(msg)
            return self.diagnostics.pop(uri)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"method": method, "params": params})

    def close(self) -> None:
        try:
            self.request("shutdown", {}, timeout=10)
            self.notify("exit", {})
            self.proc.wait(timeout=10)
        except (TimeoutError, RuntimeError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def _text(contents: Any) -> str:
    """The text of a hover's contents (markup, a marked string, or a list of them)."""
    if isinstance(contents, list):
        return "\n".join(_text(c) for c in contents)
    if isinstance(contents, dict):
        return str(contents.get("value", ""))
    return str(contents or "")


def _shown(description: str, hover: str) -> bool:
    """Whether the hover shows the description (the server may escape markdown or
    rewrap lines, so compare the words)."""
    def words(s: str) -> str:
        return " ".join(s.replace("\\", "").split())

    first = description.split("\n\n")[0]
    return bool(first.strip()) and words(first) in words(hover)


def check(specs: list[Path], schema: dict[str, Any], cmd: list[str],
          samples: frozenset[Path] = frozenset()) -> tuple[int, list[str]]:
    """Hover every field of ``specs``: (fields checked, one line per miss, schema
    errors the server reported included, except in ``samples``)."""
    with tempfile.TemporaryDirectory() as tmp:
        schema_file = Path(tmp) / "attngraph.schema.json"
        schema_file.write_text(json.dumps(schema), encoding="utf-8")
        uris = [p.resolve().as_uri() for p in specs]
        yaml_settings = {"schemas": {schema_file.as_uri(): uris}, "hover": True,
                         "validate": True, "completion": True, "format": {"enable": False},
                         "schemaStore": {"enable": False}}
        client = Client(cmd, {"yaml": yaml_settings, "": {"yaml": yaml_settings}})
        try:
            client.request("initialize", {
                "processId": os.getpid(), "rootUri": Path.cwd().as_uri(),
                "capabilities": {"textDocument": {"hover": {
                    "contentFormat": ["markdown", "plaintext"]}},
                    "workspace": {"configuration": True}},
            })
            client.notify("initialized", {})
            client.notify("workspace/didChangeConfiguration",
                          {"settings": {"yaml": yaml_settings}})
            count, misses = 0, []
            for path, uri in zip(specs, uris, strict=True):
                client.notify("textDocument/didOpen", {"textDocument": {
                    "uri": uri, "languageId": "yaml", "version": 1,
                    "text": path.read_text(encoding="utf-8")}})
                said = client.validated(uri)
                misses += [] if path in samples else [
                    f"{path}:{d['range']['start']['line'] + 1}: the server says: "
                    f"{d['message']}" for d in said]
                for f in fields(schema, path):
                    count += 1
                    hover = client.request("textDocument/hover", {
                        "textDocument": {"uri": uri},
                        "position": {"line": f.line, "character": f.col + 1}})
                    text = _text(hover["contents"]) if hover else ""
                    if not _shown(f.description, text):
                        misses.append(f"{f.file}:{f.line + 1}:{f.col + 1}: '{f.name}': "
                                      f"hover shows {text[:80]!r}")
                client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        finally:
            client.close()
    return count, misses


def main(argv: list[str] | None = None) -> int:
    """Run the check from the command line; 0 when every field shows its description."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", type=Path, help="spec files, or folders of *.yaml")
    ap.add_argument("--server", help="the yaml-language-server executable")
    ap.add_argument("--every-field", action="store_true",
                    help="also a document with every field of every model")
    args = ap.parse_args(argv)
    cmd = server_command(args.server)
    if cmd is None:
        print("hover_check: needs node and yaml-language-server (npm install -g "
              "yaml-language-server, or --server PATH)", file=sys.stderr)
        return 2
    specs = sorted(q for p in args.specs for q in (sorted(p.glob("*.yaml")) if p.is_dir()
                                                     else [p]))
    from attngraph.kinds.schema import json_schema
    from attngraph.train.tasks.lookup import task_lines

    schema = json_schema(task_lines())
    with tempfile.TemporaryDirectory() as tmp:
        samples = frozenset([Path(tmp) / "every_field.yaml"] if args.every_field else [])
        for path in samples:
            path.write_text(every_field_spec(schema), encoding="utf-8")
        count, misses = check([*specs, *samples], schema, cmd, samples)
    for line in misses:
        print(line)
    print(f"{count - len(misses)} of {count} fields show their description on hover "
          f"({len(specs)} specs{', and every field' if samples else ''})")
    return 1 if misses or not count else 0


if __name__ == "__main__":
    sys.exit(main())
