"""Protocol Buffers schemas: ``.proto`` source (proto2 or proto3) compiled to descriptors by
``protoc`` (the compiler ``grpcio-tools`` bundles), compared field by field, and event data
decoded with the compiled descriptors in the binary encoding or the JSON mapping.

Why ``protoc``: it is the reference compiler, so every rule of the language is checked (types
resolved, field numbers unique and in range, proto2/proto3 label rules, ``reserved``), and its
descriptors are what the ``protobuf`` runtime decodes with; a pure-Python parser gives a syntax
tree only, leaving those checks and the descriptors to hand-written code. It runs in a child
process with a wall-clock timeout and CPU and memory limits, which an in-process call (C++ code
holding the interpreter) could not be given: hostile source cannot hold the broker. Only the
well-known types (``google/protobuf/*.proto``) can be imported; nothing else is read.

Compatibility (a reader R decoding data written with W), for every message both define (by full
name), field by field (by number); the pointers are into the descriptor form,
``/messages/<full name>/fields/<number>``:

* a field number both use must keep its type, or move within one wire-compatible group
  (``int32``, ``uint32``, ``int64``, ``uint64``, ``bool``, ``enum``; ``sint32``, ``sint64``;
  ``fixed32``, ``sfixed32``; ``fixed64``, ``sfixed64``; ``string``, ``bytes``), and keep its
  message or enum type; its name too (the JSON mapping reads fields by name);
* ``repeated`` stays ``repeated`` and singular stays singular; a field R ``required`` (proto2)
  must be ``required`` in W, and a ``required`` field of R that W lacks breaks.

A field W has and R lacks is skipped by R (an unknown field): removing a field, with or without
``reserved``, breaks nobody's reads; reusing its number later with another type is caught when
the versions that used it are compared (the transitive policies).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import grpc_tools
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, EncodeError, Message

from cebroker.registry.formats import Break, Problem

#: seconds one compilation may take (wall clock; the CPU limit is the same)
COMPILE_TIMEOUT = 10.0
#: bytes of address space the compiler process may use
COMPILE_MEMORY = 1024 * 1024 * 1024
#: compiled documents kept (by their hash) for comparisons and event checks
CACHE_SIZE = 256

_WELL_KNOWN = str(Path(grpc_tools.__file__).parent / "_proto")
_RUN = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, ({mem}, {mem}))\n"
    "resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))\n"
    "from grpc_tools import protoc\n"
    "sys.exit(protoc.main(sys.argv))\n"
)
_F = descriptor_pb2.FieldDescriptorProto
_GROUPS = [
    {_F.TYPE_INT32, _F.TYPE_UINT32, _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_BOOL, _F.TYPE_ENUM},
    {_F.TYPE_SINT32, _F.TYPE_SINT64},
    {_F.TYPE_FIXED32, _F.TYPE_SFIXED32},
    {_F.TYPE_FIXED64, _F.TYPE_SFIXED64},
    {_F.TYPE_STRING, _F.TYPE_BYTES},
]
_SOURCE = "schema.proto"


class CompileError(Exception):
    """The compiler's messages about a document."""


def _compile(document: bytes) -> descriptor_pb2.FileDescriptorSet:
    with tempfile.TemporaryDirectory(prefix="cebroker-proto-") as tmp:
        (Path(tmp) / _SOURCE).write_bytes(document)
        out = Path(tmp) / "out.pb"
        script = _RUN.format(mem=COMPILE_MEMORY, cpu=int(COMPILE_TIMEOUT))
        argv = [
            sys.executable,
            "-c",
            script,
            f"--proto_path={tmp}",
            f"--proto_path={_WELL_KNOWN}",
            f"--descriptor_set_out={out}",
            "--include_imports",
            _SOURCE,
        ]
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(sys.path)}
        try:
            done = subprocess.run(
                argv, capture_output=True, timeout=COMPILE_TIMEOUT, env=env, cwd=tmp, check=False
            )
        except subprocess.TimeoutExpired:
            raise CompileError(f"the compiler took longer than {COMPILE_TIMEOUT:g} s") from None
        if done.returncode != 0 or not out.exists():
            text = done.stderr.decode("utf-8", "replace").strip().replace(tmp + os.sep, "")
            raise CompileError(text or f"the compiler failed (exit status {done.returncode})")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


class ProtobufFormat:
    """Protocol Buffers (``Protobuf/2``, ``Protobuf/3``): ``.proto`` source text."""

    family = "protobuf"

    def __init__(self) -> None:
        self._cache: OrderedDict[bytes, descriptor_pb2.FileDescriptorSet | CompileError] = OrderedDict()
        self._lock = threading.Lock()  # the storage's threads share one registry's formats

    def compiled(self, document: bytes) -> descriptor_pb2.FileDescriptorSet:
        """The descriptors of ``document`` (cached by its hash); raises :class:`CompileError`."""
        key = hashlib.sha256(document).digest()
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
        if found is None:
            try:
                found = _compile(document)
            except CompileError as exc:
                found = exc
            with self._lock:
                self._cache[key] = found
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        if isinstance(found, CompileError):
            raise found
        return found

    def problems(self, document: bytes, version: str) -> list[Problem]:
        """The compiler's error messages (``schema.proto:line:column: reason``)."""
        try:
            document.decode("utf-8")
        except UnicodeDecodeError as exc:
            return [Problem("", f"not UTF-8 text: {exc}")]
        try:
            self.compiled(document)
        except CompileError as exc:
            return [Problem("", line) for line in str(exc).splitlines()[:20]]
        return []

    def breaks(self, reader: bytes, writer: bytes, version: str) -> list[Break]:
        """The field-level rules of the module docstring."""
        r, w = _messages(self.compiled(reader)), _messages(self.compiled(writer))
        out: list[Break] = []
        for name, rmsg in r.items():
            if name in w:
                _compare(name, rmsg, w[name], out)
        return out

    def checker(self, document: bytes, version: str, fragment: str) -> ProtobufChecker:
        """A message class of ``document``: the one ``fragment`` names (full or short name),
        else the first message the document declares."""
        files = self.compiled(document)
        pool = descriptor_pool.DescriptorPool()
        for file in files.file:
            pool.Add(file)
        main = files.file[-1]  # --include_imports lists dependencies first
        package = f"{main.package}." if main.package else ""
        if fragment:
            names = [fragment.lstrip("."), package + fragment.lstrip(".")]
            found = [n for n in names if n in _messages(files)]
            if not found:
                raise ValueError(f"the schema defines no message {fragment!r}")
            name = found[0]
        elif main.message_type:
            name = package + main.message_type[0].name
        else:
            raise ValueError("the schema defines no message")
        return ProtobufChecker(message_factory.GetMessageClass(pool.FindMessageTypeByName(name)))


class ProtobufChecker:
    """Event data against one message type: bytes in the binary encoding, JSON in the JSON
    mapping."""

    def __init__(self, cls: type[Message]) -> None:
        self.cls = cls

    def problems(self, data: Any, binary: bytes | None, contenttype: str) -> list[Problem]:
        """Why the data does not decode as the message (or lacks required fields)."""
        message = self.cls()
        if binary is not None:
            try:
                message.ParseFromString(binary)
            except DecodeError as exc:
                return [Problem("", f"not the binary encoding of {self._name}: {exc}")]
            return _missing(message)
        try:
            json_format.ParseDict(data, message)
        except json_format.ParseError as exc:
            return [Problem("", f"not the JSON mapping of {self._name}: {exc}")]
        return _missing(message)

    @property
    def _name(self) -> str:
        return str(self.cls.DESCRIPTOR.full_name)


def _missing(message: Message) -> list[Problem]:
    """The required fields (proto2) ``message`` lacks."""
    if message.IsInitialized():
        return []
    try:
        message.SerializeToString()  # names the missing fields
    except EncodeError as exc:
        return [Problem("", str(exc))]
    return [Problem("", "required fields missing")]


def _messages(files: descriptor_pb2.FileDescriptorSet) -> dict[str, descriptor_pb2.DescriptorProto]:
    found: dict[str, descriptor_pb2.DescriptorProto] = {}

    def add(prefix: str, message: descriptor_pb2.DescriptorProto) -> None:
        name = f"{prefix}{message.name}"
        found[name] = message
        for nested in message.nested_type:
            add(name + ".", nested)

    for file in files.file:
        for message in file.message_type:
            add(f"{file.package}." if file.package else "", message)
    return found


def _type_name(field: Any) -> str:
    return str(_F.Type.Name(field.type)).removeprefix("TYPE_").lower()


def _compatible(r: Any, w: Any) -> bool:
    if r.type == w.type:
        return r.type not in (_F.TYPE_MESSAGE, _F.TYPE_ENUM, _F.TYPE_GROUP) or r.type_name == w.type_name
    return any(r.type in group and w.type in group for group in _GROUPS) and _F.TYPE_ENUM not in (
        r.type,
        w.type,
    )


def _compare(
    name: str, r: descriptor_pb2.DescriptorProto, w: descriptor_pb2.DescriptorProto, out: list[Break]
) -> None:
    base = f"/messages/{name}"
    rfields = {f.number: f for f in r.field}
    wfields = {f.number: f for f in w.field}
    reserved = [(rr.start, rr.end) for rr in r.reserved_range]  # end is exclusive
    for number, wf in wfields.items():
        where = f"{base}/fields/{number}"
        rf = rfields.get(number)
        if rf is None:
            if any(start <= number < end for start, end in reserved):
                out.append(
                    Break(f"{base}/reserved", where, f"field number {number} is reserved by the reader")
                )
            continue
        _compare_field(rf, wf, where, out)
    for number, rf in rfields.items():
        if number not in wfields and rf.label == _F.LABEL_REQUIRED:
            reason = f"field {number} ({rf.name}) is required by the reader; the writer lacks it"
            out.append(Break(f"{base}/fields/{number}", base, reason))


def _compare_field(rf: Any, wf: Any, where: str, out: list[Break]) -> None:
    number = rf.number
    if not _compatible(rf, wf):
        rt = rf.type_name.lstrip(".") or _type_name(rf)
        wt = wf.type_name.lstrip(".") or _type_name(wf)
        reason = f"field {number}: the reader's {rt} cannot read the writer's {wt}"
        out.append(Break(f"{where}/type", f"{where}/type", reason))
    if (rf.label == _F.LABEL_REPEATED) != (wf.label == _F.LABEL_REPEATED):
        out.append(Break(f"{where}/label", f"{where}/label", f"field {number}: repeated on one side only"))
    elif rf.label == _F.LABEL_REQUIRED and wf.label != _F.LABEL_REQUIRED:
        reason = f"field {number}: required by the reader, optional for the writer"
        out.append(Break(f"{where}/label", f"{where}/label", reason))
    if rf.name != wf.name:
        reason = (
            f"field {number}: named {rf.name!r} by the reader and {wf.name!r} by the writer "
            "(the JSON mapping reads names)"
        )
        out.append(Break(f"{where}/name", f"{where}/name", reason))
