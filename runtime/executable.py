"""The ``.vtax`` executable: a compiled model in one file, and the object that runs it.

File layout (all integers little-endian)::

    magic        8 bytes   b"\\x89VTAX\\r\\n\\x1a"  (a text-mode transfer or a foreign file
                                                    breaks it; PNG's trick)
    version      u32       FORMAT_VERSION
    sections, in this order, each   tag (4 ASCII bytes) | length u64 | payload | crc32 u32
        HEAD   JSON: vtakit version, hardware config (TVM vta_config.json keys), entry
               function, input/output names and types, peak planned host memory and
               device DRAM
        GLOB   JSON: per function name, params, registers, code words, planned host arena
               and device DRAM arena
        CONS   constants: u32 count, then per constant u64 length + a .npy file (no pickle):
               host constants and the VTA layers' weights, packed as the kernels read them
        PRIM   JSON: the primitive table (name, kind, arity, factory metadata: host
               steps naming registered host operators, VTA layers as data, see
               :mod:`.vta_layer`)
        KERN   kernel table: u32 count, then per kernel u16 name length, name (UTF-8),
               u64 blob length, blob (a serialized Program)
        CODE   the bytecode of every function in GLOB order, int64 words
        END    SHA-256 of every byte before this section

A section's CRC covers its tag, length and payload, so any bit flip or
truncation is reported as one :class:`ExecutableError` line naming the section
and its byte offset; a file that passes the checksums is then decoded and
verified (every register, jump, function, constant and primitive index in
range) so a hand-crafted file cannot crash the VM either. Writing is
deterministic: the same executable always gives the same bytes.

Everything a run needs is data: loading and running use :mod:`vtakit.runtime` and a
device backend only (never the compiler, a model framework or a tile search). A
file of another format version is refused with one line saying to recompile.
Version 3 made executables self-contained (version 2 recorded compiler modules and
each VTA layer's IR, planned again at load).
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..hw.errors import InputError, VtakitError
from .dram import whole_pages
from .module import PrimitiveEntry
from .program import Program, ProgramFormatError
from .vm.objects import flatten
from .vm.bytecode import BytecodeError, Opcode, VMFunction, decode_function, encode_function, \
    format_instruction, verify_function

__all__ = ["Executable", "ExecutableError", "MAGIC", "FORMAT_VERSION", "SECTIONS", "load",
           "read_inputs"]

MAGIC = b"\x89VTAX\r\n\x1a"
FORMAT_VERSION = 4
#: Format versions this runtime reads: 4 added the optional ``pre`` host step of a VTA
#: layer (:mod:`.vta_layer`), which a version 3 runtime would silently skip; a version
#: 3 file has none and reads as before.
READ_VERSIONS = (3, 4)
SECTIONS = ("HEAD", "GLOB", "CONS", "PRIM", "KERN", "CODE", "END\0")
_SEC = struct.Struct("<4sQ")
_CRC = struct.Struct("<I")


class ExecutableError(VtakitError, ValueError):
    """A ``.vtax`` file that cannot be loaded; the message is one line naming the section and
    byte offset.

    Attributes
    ----------
    section : str or None
    offset : int or None
        Byte offset in the file.
    """

    def __init__(self, message, section=None, offset=None):
        super().__init__(message)
        self.section, self.offset = section, offset


def _version() -> str:
    from .. import __version__
    return __version__


def _json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class Executable:
    """A compiled model: VM functions, constants, primitives, kernels and the hardware config.

    Attributes
    ----------
    config : VTAConfig
    functions : list of VMFunction
        Index = the function index of ``Invoke``/``AllocClosure``.
    constants : list of numpy.ndarray
        The constant pool (read-only arrays).
    primitives : list of PrimitiveEntry
        Index = the packed index of ``InvokePacked``.
    kernels : list of (str, bytes)
        The kernel table: serialized VTA Programs by name.
    entry : str
        The function :meth:`run` calls.
    inputs, outputs : list of dict
        ``{"name", "shape", "dtype"}`` of the entry function's parameters and of
        its results (shape/dtype may be None when unknown).
    """

    config: object
    functions: list
    constants: list = field(default_factory=list)
    primitives: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    entry: str = "main"
    inputs: list = None
    outputs: list = None
    #: primitive name -> a function a lowerer returned in this process (never saved: a
    #: loaded executable finds such a primitive in the registry)
    local_functions: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        from ..hw.config import load_config
        self.config = load_config(self.config)
        self.kernels = [(str(n), k.to_bytes() if isinstance(k, Program) else bytes(k))
                        for n, k in self.kernels]
        self.constants = [_readonly(c) for c in self.constants]
        if self.inputs is None:
            main = self.function(self.entry)
            self.inputs = [{"name": p, "shape": None, "dtype": None} for p in main.params]
        if self.outputs is None:
            self.outputs = [{"name": "output", "shape": None, "dtype": None}]
        self.verify()

    # ------------------------------------------------------------------ queries
    def function(self, name: str) -> VMFunction:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"the executable has no function {name!r}; it has "
                       + ", ".join(f.name for f in self.functions))

    def _storage_bytes(self, device: int) -> int:
        alloc = Opcode.ALLOC_STORAGE.value
        size = whole_pages if device else int       # device DRAM comes in whole pages
        return max((sum(size(ins[1]) for ins in f.code if ins[0] == alloc and ins[4] == device)
                    for f in self.functions), default=0)

    @property
    def peak_host_bytes(self) -> int:
        """The most host memory one function call allocates for tensors (its planned arena
        plus the storage of the tensors it returns or passes on), over the functions."""
        return self._storage_bytes(0)

    @property
    def peak_dram_bytes(self) -> int:
        """Device DRAM a run needs at most: the VTA kernels' resident weights (uploaded once
        per VM), the entry function's planned device arena (tensors kept on the device
        between layers, reused by liveness; the compiler keeps tensors on the device only
        there, and only when nothing calls it, so one frame holds one) and the largest
        staging one kernel needs (inputs arriving from the host, results going to it);
        whole DRAM pages. The runtime's instruction and micro-op streams come on top."""
        plan = self.dram_plan()
        return plan["weights"] + plan["arena"] + plan["staging"]

    def dram_plan(self) -> dict:
        """The parts of :attr:`peak_dram_bytes` (``weights``, ``arena``, ``staging``) and
        ``device_tensors``: how many tensors the bytecode keeps on the device."""
        meta = [p.meta_dict for p in self.primitives]
        alloc, tensor = Opcode.ALLOC_STORAGE.value, Opcode.ALLOC_TENSOR.value
        kept = 0
        for f in self.functions:
            device = {ins[3] for ins in f.code if ins[0] == alloc and ins[4]}
            kept += sum(1 for ins in f.code if ins[0] == tensor and ins[1] in device)
        return {"weights": sum(int(m.get("dram_weights", 0)) for m in meta),
                "arena": self._storage_bytes(1),
                "staging": max((int(m.get("dram_scratch", 0)) for m in meta), default=0),
                "device_tensors": kept}

    @property
    def input_names(self) -> list[str]:
        return [i["name"] for i in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [o["name"] for o in self.outputs]

    def verify(self) -> None:
        """Check every instruction's operands against the tables (:class:`BytecodeError`)."""
        params = [len(f.params) for f in self.functions]
        fnames = [f.name for f in self.functions]
        if len(set(fnames)) != len(fnames):
            raise BytecodeError("function names must be unique")
        self.function(self.entry)
        names = [k[0] for k in self.kernels]
        if len(set(names)) != len(names):
            raise BytecodeError("kernel names must be unique")
        for name, blob in self.kernels:
            self._check_kernel(name, blob)     # parsed once: kept for program()
        for f in self.functions:
            try:
                verify_function(f, num_funcs=len(self.functions), num_packed=len(self.primitives),
                                num_consts=len(self.constants), func_params=params)
            except BytecodeError as e:
                raise BytecodeError(f"function {f.name!r}: {e}", e.index, e.word, f.name) \
                    from None

    def _check_kernel(self, name, blob) -> Program:
        cache = self.__dict__.setdefault("_parsed", {})    # Programs are immutable
        prog = cache.get(blob)
        if prog is None:
            try:
                prog = Program.from_bytes(blob)
            except ProgramFormatError as e:
                raise KernelTableError(f"kernel {name!r}: {e}", name) from None
        if prog.config != self.config:
            raise KernelTableError(f"kernel {name!r} is built for config {prog.config.name}, "
                                   f"the executable for {self.config.name}", name)
        cache[bytes(blob)] = prog       # shared by every VM of the executable
        return prog

    def program(self, name: str) -> Program:
        """A kernel-table entry as a :class:`~vtakit.runtime.program.Program`."""
        for n, blob in self.kernels:
            if n == name:
                return self._check_kernel(n, blob)
        raise KeyError(f"the executable has no kernel {name!r}; its kernels are "
                       + (", ".join(n for n, _ in self.kernels) or "none"))

    # ------------------------------------------------------------------ running
    def vm(self, backend: str = "behavioral", **kwargs):
        """A :class:`~vtakit.runtime.vm.VirtualMachine` for this executable (see its options)."""
        from .vm.interpreter import VirtualMachine
        return VirtualMachine(self, backend, **kwargs)

    def _args(self, inputs) -> list:
        names = self.input_names
        if isinstance(inputs, dict):
            unknown = [k for k in inputs if k not in names]
            missing = [n for n in names if n not in inputs]
            if unknown or missing:
                raise InputError(f"inputs {sorted(inputs)} do not match the model's inputs "
                                 f"{names}")
            args = [inputs[n] for n in names]
        elif isinstance(inputs, (list, tuple)):
            args = list(inputs)
        else:
            args = [inputs]
        if len(args) != len(names):
            raise InputError(f"the model takes {len(names)} inputs ({', '.join(names)}), "
                             f"got {len(args)}")
        out = []
        for spec, a in zip(self.inputs, args):
            a = np.asarray(a)
            shape, dtype = spec.get("shape"), spec.get("dtype")
            if (shape is not None and tuple(a.shape) != tuple(shape)) or \
                    (dtype is not None and a.dtype != np.dtype(dtype)):
                raise InputError(f"input {spec['name']!r} is {a.dtype}{list(a.shape)}; the model "
                                 f"expects {dtype}{list(shape) if shape is not None else ''}")
            out.append(a)
        return out

    def run(self, inputs=(), backend: str = "behavioral", *, hook=None, device=None,
            device_options=None, hook_outputs=True, chain=True):
        """Run the entry function.

        Parameters
        ----------
        inputs : dict, sequence or array
            By input name, in order, or the one input.
        backend : str
            Device backend of the VTA kernels (``behavioral``, ``pysim``, ``cxxrtl``,
            ``verilator``); no device is opened if the model runs only host code.
        hook : callable, optional
            ``hook(name, output)`` after every layer (see ``VirtualMachine``).
        device, device_options :
            An open device to use, or options of the one to open.
        hook_outputs, chain : bool
            See ``VirtualMachine``: whether the hook sees outputs, and whether
            device-resident layers run chained (one stream, one synchronize).

        Returns
        -------
        numpy.ndarray or tuple
        """
        args = self._args(inputs)
        with self.vm(backend, hook=hook, device=device, device_options=device_options,
                     hook_outputs=hook_outputs, chain=chain) as vm:
            return vm.run(*args, func=self.entry)

    def run_named(self, inputs=(), backend: str = "behavioral", **kwargs) -> dict:
        """:meth:`run`, with the outputs in a dict by output name (nested tuples flattened)."""
        result = self.run(inputs, backend, **kwargs)
        flat = list(flatten(result))
        names = self.output_names
        if len(flat) != len(names):
            names = [f"output{i}" for i in range(len(flat))] if len(flat) > 1 else ["output"]
        for n, v in zip(names, flat):
            if not isinstance(v, np.ndarray):
                raise TypeError(f"output {n!r} is a {type(v).__name__} ({v!r}), not a tensor; "
                                "Executable.run returns such values as they are")
        return dict(zip(names, flat))

    # ------------------------------------------------------------------ writing
    def header(self) -> dict:
        return {"vtakit_version": _version(), "config": self.config.to_dict(),
                "entry": self.entry, "inputs": self.inputs, "outputs": self.outputs,
                "peak_host_bytes": self.peak_host_bytes, "peak_dram_bytes": self.peak_dram_bytes}

    def to_bytes(self) -> bytes:
        """The ``.vtax`` file contents (deterministic)."""
        codes = [encode_function(f) for f in self.functions]
        glob = [{"name": f.name, "params": list(f.params), "num_regs": f.num_regs,
                 "code_words": len(c), "arena_bytes": f.arena_bytes,
                 "naive_bytes": f.naive_bytes, "dram_bytes": f.dram_bytes}
                for f, c in zip(self.functions, codes)]
        cons = io.BytesIO()
        cons.write(struct.pack("<I", len(self.constants)))
        for c in self.constants:
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.array(c, order="C", copy=None), version=(1, 0),
                                      allow_pickle=False)
            cons.write(struct.pack("<Q", buf.tell()))
            cons.write(buf.getvalue())
        kern = io.BytesIO()
        kern.write(struct.pack("<I", len(self.kernels)))
        for name, blob in self.kernels:
            raw = name.encode()
            kern.write(struct.pack("<H", len(raw)) + raw + struct.pack("<Q", len(blob)))
            kern.write(bytes(blob))
        payloads = {
            "HEAD": _json(self.header()), "GLOB": _json(glob), "CONS": cons.getvalue(),
            "PRIM": _json([p.to_json() for p in self.primitives]), "KERN": kern.getvalue(),
            "CODE": b"".join(c.tobytes() for c in codes),
        }
        out = bytearray(MAGIC + struct.pack("<I", FORMAT_VERSION))
        for tag in SECTIONS[:-1]:
            out += _section(tag, payloads[tag])
        out += _section("END\0", hashlib.sha256(out).digest())
        return bytes(out)

    def save(self, path) -> Path:
        """Write the file; returns its path."""
        path = Path(path)
        path.write_bytes(self.to_bytes())
        return path

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "<bytes>", config=None) -> "Executable":
        """Parse and check a ``.vtax`` file's contents.

        Parameters
        ----------
        config : VTAConfig or str, optional
            If given, the hardware the caller expects; a file built for another is an error.

        Raises
        ------
        ExecutableError
            One line: the source, the section, the byte offset and what is wrong.
        """
        return _Reader(bytes(data), source).read(cls, config)

    @classmethod
    def load(cls, path, *, config=None) -> "Executable":
        """Read a ``.vtax`` file (see :meth:`from_bytes`)."""
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise ExecutableError(f"{path}: cannot read ({e.strerror})") from None
        return cls.from_bytes(data, source=str(path), config=config)

    # ------------------------------------------------------------------ text
    def disasm(self) -> str:
        """The bytecode, the primitive table and the kernel table as text."""
        names = [p.name for p in self.primitives]
        fnames = [f.name for f in self.functions]
        lines = [f"; vtax format {FORMAT_VERSION}, vtakit {_version()}, config "
                 f"{self.config.name}, peak planned memory {self.peak_host_bytes} bytes host, "
                 f"{self.peak_dram_bytes} bytes device DRAM",
                 "; inputs: " + ", ".join(f"{i['name']}: {i.get('dtype')}{i.get('shape')}"
                                           for i in self.inputs),
                 "; outputs: " + ", ".join(o["name"] for o in self.outputs)]
        for f in self.functions:
            params = ", ".join(f"${i}:{p}" for i, p in enumerate(f.params))
            lines.append(f"\ndef @{f.name}({params})"
                         f"  ; {f.num_regs} registers, arena {f.arena_bytes} bytes"
                         f" (unplanned {f.naive_bytes})"
                         + (f", device DRAM arena {f.dram_bytes} bytes" if f.dram_bytes else ""))
            for pc, ins in enumerate(f.code):
                lines.append(f"  {pc:4d}: " + format_instruction(ins, packed_names=names,
                                                                   func_names=fnames))
        lines.append("\nconstants:")
        for i, c in enumerate(self.constants):
            lines.append(f"  {i:4d}: {c.dtype}{list(c.shape)}")
        lines.append("\nprimitives:")
        for i, p in enumerate(self.primitives):
            lines.append(f"  {i:4d}: {p.name}  kind={p.kind} in={p.num_inputs} "
                         f"out={p.num_outputs}")
        lines.append("\nkernels:")
        for name, blob in self.kernels:
            lines.append(f"  {name}: {len(blob)} bytes")
            lines.extend("    " + line for line in _kernel_text(blob, self.config))
        return "\n".join(lines)


def _kernel_text(blob, config) -> list[str]:
    """A kernel's slots and disassembly."""
    prog = Program.from_bytes(blob)
    slots = ", ".join(f"{n} ({b} B)" for n, b in prog.slots.items())
    return [f"{prog!r}", f"slots: {slots or 'none'}"] + prog.disasm()


def _readonly(a) -> np.ndarray:
    a = np.array(a, copy=True) if not isinstance(a, np.ndarray) or a.flags.writeable else a
    a.flags.writeable = False
    return a



def _section(tag: str, payload: bytes) -> bytes:
    head = _SEC.pack(tag.encode("ascii"), len(payload))
    return head + payload + _CRC.pack(zlib.crc32(head + payload))


class KernelTableError(VtakitError, ValueError):
    """A kernel-table entry that is not a Program for the executable's config."""

    def __init__(self, message, name):
        super().__init__(message)
        self.name = name


class _Reader:
    """Parses a ``.vtax`` file; every failure is an ExecutableError with section and offset."""

    def __init__(self, data: bytes, source: str):
        self.data, self.source = data, source

    def fail(self, section, offset, msg):
        where = (f"section {section.strip(chr(0))}, byte {offset}" if section
                 else f"header, byte {offset}" if offset < 12 else f"end of file, byte {offset}")
        return ExecutableError(f"{self.source}: {where}: {msg}", section, offset)

    def read(self, cls, expected_config):
        data = self.data
        if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
            raise self.fail(None, 0, "not a vtakit executable (bad magic; expected "
                                     f"{MAGIC!r})")
        if len(data) < 12:
            raise self.fail(None, 8, "truncated: the file ends inside the format version")
        (version,) = struct.unpack_from("<I", data, 8)
        if version not in READ_VERSIONS:
            raise self.fail(None, 8, f"format version {version} is not supported (this vtakit "
                                     f"reads versions {READ_VERSIONS[0]} to "
                                     f"{READ_VERSIONS[-1]}); recompile the model: "
                                     "vtakit compile MODEL -o OUT.vtax")
        pos, payloads = 12, {}
        for tag in SECTIONS:
            name = tag.strip("\0")
            if pos + _SEC.size > len(data):
                raise self.fail(tag, pos, f"truncated: the file ends ({len(data)} bytes) before "
                                          f"the {name} section header")
            raw_tag, length = _SEC.unpack_from(data, pos)
            if raw_tag != tag.encode():
                raise self.fail(tag, pos, f"expected section tag {name!r}, found {raw_tag!r}")
            end = pos + _SEC.size + length
            if end + _CRC.size > len(data):
                raise self.fail(tag, pos, f"truncated: the section claims {length} bytes but the "
                                          f"file ends at byte {len(data)}")
            (crc,) = _CRC.unpack_from(data, end)
            actual = zlib.crc32(data[pos:end])
            if crc != actual:
                raise self.fail(tag, pos, f"checksum mismatch (stored 0x{crc:08x}, computed "
                                          f"0x{actual:08x}): the file is corrupt")
            payloads[tag] = (pos + _SEC.size, data[pos + _SEC.size:end])
            pos = end + _CRC.size
        if pos != len(data):
            raise self.fail(None, pos, f"{len(data) - pos} unexpected bytes after the END "
                                       "section")
        end_pos, digest = payloads["END\0"]
        if digest != hashlib.sha256(data[:end_pos - _SEC.size]).digest():
            raise self.fail("END\0", end_pos - _SEC.size, "file checksum (SHA-256) mismatch")
        return self.decode(cls, payloads, expected_config)

    def json(self, payloads, tag, kind):
        offset, raw = payloads[tag]
        try:
            value = json.loads(raw.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise self.fail(tag, offset, f"not valid JSON ({e})") from None
        if not isinstance(value, kind):
            raise self.fail(tag, offset, f"expected a JSON {kind.__name__}, got "
                                         f"{type(value).__name__}")
        return value

    def decode(self, cls, payloads, expected_config):
        from ..hw.config import ConfigError, VTAConfig, extension_note, load_config
        head = self.json(payloads, "HEAD", dict)
        hoff = payloads["HEAD"][0]
        try:
            config = VTAConfig.from_dict(head["config"], source="recorded config")
            entry, inputs, outputs = str(head["entry"]), head["inputs"], head["outputs"]
            for spec in inputs + outputs:
                if not isinstance(spec, dict) or not isinstance(spec["name"], str):
                    raise TypeError(f"an input/output record must name it, got {spec!r}")
        except (KeyError, TypeError, ConfigError) as e:
            raise self.fail("HEAD", hoff, f"bad header ({e})") from None
        if expected_config is not None:
            expected = load_config(expected_config)
            if expected != config:
                raise self.fail("HEAD", hoff, f"built for config {config.name}, not "
                                              f"{expected.name}{extension_note(config, expected)}")
        functions, words = self.functions(payloads)
        constants = self.constants(payloads)
        prim = self.json(payloads, "PRIM", list)
        try:
            primitives = [PrimitiveEntry.from_json(p) for p in prim]
        except (KeyError, TypeError, ValueError) as e:
            raise self.fail("PRIM", payloads["PRIM"][0], f"bad primitive entry ({e})") from None
        kernels, kernel_offsets = self.kernels(payloads)
        try:
            return cls(config, functions, constants, primitives, kernels, entry, inputs,
                       outputs)
        except KernelTableError as e:
            raise self.fail("KERN", payloads["KERN"][0] + kernel_offsets[e.name], str(e)) \
                from None
        except BytecodeError as e:
            off = payloads["CODE"][0]
            func = next((f for f in functions if f.name == e.function), None)
            if func is not None and e.index is not None:
                off += 8 * (words[func.name] + func.starts[e.index])
            raise self.fail("CODE", off, str(e)) from None
        except (KeyError, TypeError, ValueError) as e:
            raise self.fail("GLOB", payloads["GLOB"][0], f"inconsistent executable ({e})") \
                from None

    def functions(self, payloads):
        glob = self.json(payloads, "GLOB", list)
        goff = payloads["GLOB"][0]
        coff, code = payloads["CODE"]
        if len(code) % 8:
            raise self.fail("CODE", coff, f"{len(code)} bytes is not a whole number of "
                                          "8-byte words")
        allwords = np.frombuffer(code, dtype="<i8")
        functions, pos, first_word = [], 0, {}
        for g in glob:
            try:
                name, params = str(g["name"]), [str(p) for p in g["params"]]
                num_regs, n = int(g["num_regs"]), int(g["code_words"])
                arena, naive = int(g["arena_bytes"]), int(g["naive_bytes"])
                dram = int(g["dram_bytes"])
            except (KeyError, TypeError, ValueError) as e:
                raise self.fail("GLOB", goff, f"bad function record ({e})") from None
            if n < 0 or pos + n > len(allwords):
                raise self.fail("GLOB", goff, f"function {name!r} claims {n} code words; the "
                                              f"code section has {len(allwords) - pos} left")
            try:
                instrs, starts = decode_function(allwords[pos:pos + n])
            except BytecodeError as e:
                raise self.fail("CODE", coff + 8 * (pos + e.word),
                                f"function {name!r}: {e}") from None
            f = VMFunction(name, params, num_regs, instrs, arena, naive, dram)
            f.starts = starts
            first_word[name] = pos
            functions.append(f)
            pos += n
        if pos != len(allwords):
            raise self.fail("CODE", coff + 8 * pos, f"{len(allwords) - pos} code words belong "
                                                    "to no function")
        return functions, first_word

    def constants(self, payloads):
        off, raw = payloads["CONS"]
        if len(raw) < 4:
            raise self.fail("CONS", off, "truncated constant count")
        (count,) = struct.unpack_from("<I", raw, 0)
        pos, out = 4, []
        for i in range(count):
            if pos + 8 > len(raw):
                raise self.fail("CONS", off + pos, f"constant {i} of {count}: truncated length")
            (n,) = struct.unpack_from("<Q", raw, pos)
            pos += 8
            if pos + n > len(raw):
                raise self.fail("CONS", off + pos, f"constant {i}: {n} bytes run past the "
                                                   "section end")
            try:
                arr = np.lib.format.read_array(io.BytesIO(raw[pos:pos + n]), allow_pickle=False)
            except Exception as e:    # numpy raises several types on a malformed .npy
                raise self.fail("CONS", off + pos, f"constant {i} is not a valid .npy array "
                                                   f"({e})") from None
            out.append(arr)
            pos += n
        if pos != len(raw):
            raise self.fail("CONS", off + pos, "bytes after the last constant")
        return out

    def kernels(self, payloads):
        off, raw = payloads["KERN"]
        if len(raw) < 4:
            raise self.fail("KERN", off, "truncated kernel count")
        (count,) = struct.unpack_from("<I", raw, 0)
        pos, out, offsets = 4, [], {}
        for i in range(count):
            if pos + 2 > len(raw):
                raise self.fail("KERN", off + pos, f"kernel {i}: truncated name length")
            (n,) = struct.unpack_from("<H", raw, pos)
            pos += 2
            if pos + n + 8 > len(raw):
                raise self.fail("KERN", off + pos, f"kernel {i}: name runs past the section end")
            try:
                name = raw[pos:pos + n].decode()
            except UnicodeDecodeError:
                raise self.fail("KERN", off + pos, f"kernel {i}: name is not UTF-8") from None
            pos += n
            (m,) = struct.unpack_from("<Q", raw, pos)
            pos += 8
            if pos + m > len(raw):
                raise self.fail("KERN", off + pos, f"kernel {name!r}: {m} bytes run past the "
                                                   "section end")
            out.append((name, raw[pos:pos + m]))
            offsets[name] = pos
            pos += m
        if pos != len(raw):
            raise self.fail("KERN", off + pos, "bytes after the last kernel")
        return out, offsets


def load(path, *, config=None) -> Executable:
    """Read a ``.vtax`` file: :meth:`Executable.load`."""
    return Executable.load(path, config=config)


#: First bytes of a ``.npy`` file and of a ``.npz`` (a zip archive).
NPY_MAGIC, NPZ_MAGIC = b"\x93NUMPY", b"PK"


def read_inputs(exe: Executable, specs) -> dict:
    """Model inputs from files, as the command line gives them.

    Parameters
    ----------
    exe : Executable
    specs : list of str
        ``NAME=FILE.npy`` or ``FILE.npy`` (the inputs in order), or one ``FILE.npz``
        holding arrays named like the inputs. Read without pickle.

    Returns
    -------
    dict of str -> numpy.ndarray
    """
    names = exe.input_names
    expected = ", ".join(f"{i['name']}: {i.get('dtype')}"
                         + (str(list(i["shape"])) if i.get("shape") is not None else "")
                         for i in exe.inputs)
    if not specs and names:
        raise InputError(f"the model takes {len(names)} input(s) ({expected}); give them with "
                         "--input [NAME=]X.npy (repeatable) or one --input X.npz")
    out = {}
    positional = 0
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = None, spec
        try:
            with open(path, "rb") as f:
                head = f.read(6)
        except FileNotFoundError:
            raise InputError(f"--input {spec}: no such file") from None
        except OSError as e:
            raise InputError(f"--input {spec}: cannot read ({e.strerror})") from None
        if not head.startswith((NPY_MAGIC, NPZ_MAGIC)):
            raise InputError(f"--input {spec}: not a .npy or .npz file (it starts with "
                             f"{head!r}, not {NPY_MAGIC!r} or {NPZ_MAGIC!r}); write arrays "
                             "with numpy.save or numpy.savez")
        try:
            data = np.load(path, allow_pickle=False)
        except Exception as e:    # numpy raises several types for a malformed file
            raise InputError(f"--input {spec}: not a .npy/.npz file ({e})") from None
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                out.update({k: data[k] for k in data.files})
            continue
        if name is None:
            if positional >= len(names):
                raise InputError(f"--input {spec}: the model has only {len(names)} inputs "
                                 f"({', '.join(names)})")
            name = names[positional]
            positional += 1
        out[name] = data
    missing = [n for n in names if n not in out]
    if missing:
        raise InputError(f"--input: no array for input(s) {', '.join(missing)}; the model "
                         f"takes {expected}")
    return out
