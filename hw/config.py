"""The one VTA configuration object.

A :class:`VTAConfig` is built from a TVM-style ``vta_config.json`` (the keys of
TVM's VTA package, HW_VER 0.0.2) or from a named preset shipped with vtakit.
It is validated on construction, so an illegal configuration never reaches the
RTL generator, the ISA, the model or the compiler. Every derived width and
depth is a property of this class and is computed nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .errors import VtakitError
from .spec import (ALU_OPCODE_BITS, DEP_FLAGS, ENCODING_UNIT_BITS, EXTENSION_CONFLICTS, EXTENSIONS,
                   IMM_BITS, INSN_BITS, LOOP_ITER_BITS, OPCODE_BITS, SRAM_BASE_BITS, UOP_BITS)

__all__ = ["VTAConfig", "ConfigError", "PRESETS", "load_config", "config_from_spec",
           "BUS_WIDTH_BY_TARGET", "extension_note"]


class ConfigError(VtakitError, ValueError):
    """An illegal or unreadable VTA configuration."""


#: log2 of the DRAM bus width in bits, by ``TARGET`` (reference section 1.2).
BUS_WIDTH_BY_TARGET = {
    "sim": 6, "tsim": 6, "intelfocl": 6, "pynq": 6, "de10nano": 6,
    "ultra96": 7, "zcu104": 7,
}

#: Names of the presets shipped as package data (``hw/presets/NAME.json``).
PRESETS = ("default", "pynq", "ultra96", "de10nano", "4x8", "tiny")

#: JSON key -> dataclass field, in the order of TVM's vta_config.json.
_KEYS = {
    "TARGET": "target",
    "HW_VER": "hw_ver",
    "LOG_INP_WIDTH": "log_inp_width",
    "LOG_WGT_WIDTH": "log_wgt_width",
    "LOG_ACC_WIDTH": "log_acc_width",
    "LOG_BATCH": "log_batch",
    "LOG_BLOCK": "log_block",
    "LOG_UOP_BUFF_SIZE": "log_uop_buff_size",
    "LOG_INP_BUFF_SIZE": "log_inp_buff_size",
    "LOG_WGT_BUFF_SIZE": "log_wgt_buff_size",
    "LOG_ACC_BUFF_SIZE": "log_acc_buff_size",
}

#: The optional key naming the ISA extensions (:data:`~vtakit.hw.spec.EXTENSIONS`) a config
#: enables; absent (or ``[]``): plain HW_VER 0.0.2, and :meth:`VTAConfig.to_dict` leaves it out.
EXTENSIONS_KEY = "EXTENSIONS"

#: The optional micro-architecture key (not TVM's, not an ISA change): ``1`` lets the compute
#: module run an ALU instruction in a second lane beside the GEMMs after it
#: (:mod:`vtakit.hw.compute_lane`); absent (or ``0``): one lane, as TVM's VTA. The
#: ``default`` preset sets it; the board presets and TVM's own ``vta_config.json`` files do
#: not. A spec ``NAME+overlap`` sets it (``tiny+overlap``), ``NAME+serial`` clears it
#: (``default+serial``: TVM's VTA, config name ``1x16_i8w8a32_15_15_18_17``).
OVERLAP_KEY = "COMPUTE_OVERLAP"
#: The ``+NAME`` of :func:`config_from_spec` that sets :data:`OVERLAP_KEY`.
OVERLAP_SPEC = "overlap"
#: The ``+NAME`` of :func:`config_from_spec` that clears :data:`OVERLAP_KEY`.
SERIAL_SPEC = "serial"
#: The optional micro-architecture key (not TVM's, not an ISA change): ``1`` lets the compute
#: module stream a LOAD UOP without push flags: it goes on dispatching the instructions after
#: it while the micro-ops arrive, a GEMM/ALU once the micro-ops it reads have been written
#: (:mod:`vtakit.hw.compute`); absent (or ``0``): a LOAD UOP holds the module until its last
#: micro-op is written, as TVM's VTA. No preset sets it; a spec ``NAME+uopstream`` does
#: (``default+requant2+uopstream``, config name ``...+uopstream``).
UOP_STREAM_KEY = "UOP_STREAM"
#: The ``+NAME`` of :func:`config_from_spec` that sets :data:`UOP_STREAM_KEY`.
UOP_STREAM_SPEC = "uopstream"

#: Derived parameters that :meth:`VTAConfig.derived` (``vtakit config show``) prints after the
#: keys. Loading accepts them when they match (they cannot be set); ``name`` and ``model``
#: are labels and are not checked.
_DERIVED = ("log_block_in", "log_block_out", "log_out_width", "log_out_buff_size",
            "log_bus_width", "bus_width", "inp_width", "wgt_width", "acc_width",
            "out_width", "batch", "block_in", "block_out",
            "inp_elem_bits", "wgt_elem_bits", "acc_elem_bits", "out_elem_bits",
            "uop_elem_bits", "insn_bits",
            "inp_elem_bytes", "wgt_elem_bytes", "acc_elem_bytes", "out_elem_bytes",
            "log_uop_depth", "log_inp_depth", "log_wgt_depth", "log_acc_depth",
            "log_out_depth", "uop_depth", "inp_depth", "wgt_depth", "acc_depth",
            "out_depth", "inp_axi_ratio", "wgt_axi_ratio", "acc_axi_ratio",
            "out_axi_ratio", "macs_per_cycle")
_LABELS = ("name", "model")

SUPPORTED_HW_VER = "0.0.2"


@dataclass(frozen=True)
class VTAConfig:
    """A validated VTA hardware configuration.

    Parameters
    ----------
    target, hw_ver, log_* :
        The values of the TVM ``vta_config.json`` keys of the same name
        (``TARGET``, ``HW_VER``, ``LOG_INP_WIDTH``, ...).
    extensions : tuple of str
        The ISA extensions enabled (key ``"EXTENSIONS"``, a list of names of
        :data:`~vtakit.hw.spec.EXTENSIONS`), kept sorted; empty: HW_VER 0.0.2 exactly.
    compute_overlap : int
        Key ``"COMPUTE_OVERLAP"`` (optional, 0 or 1): the compute module runs ALU
        instructions in a second lane beside the GEMMs (a micro-architecture option, the
        ISA is unchanged); 0 (absent): one lane.
    uop_stream : int
        Key ``"UOP_STREAM"`` (optional, 0 or 1): the compute module streams a LOAD UOP
        without push flags beside the instructions after it (a micro-architecture option,
        the ISA is unchanged); 0 (absent): a LOAD UOP holds the module until it is done.

    Raises
    ------
    ConfigError
        If any value or combination of values is illegal; the message names the
        key, its value and the limit.
    """

    target: str = "sim"
    hw_ver: str = SUPPORTED_HW_VER
    log_inp_width: int = 3
    log_wgt_width: int = 3
    log_acc_width: int = 5
    log_batch: int = 0
    log_block: int = 4
    log_uop_buff_size: int = 15
    log_inp_buff_size: int = 15
    log_wgt_buff_size: int = 18
    log_acc_buff_size: int = 17
    extensions: tuple = ()
    compute_overlap: int = 0
    uop_stream: int = 0

    def __post_init__(self):
        ext = self.extensions
        if isinstance(ext, str) or not isinstance(ext, (list, tuple, set, frozenset)) \
                or not all(isinstance(e, str) for e in ext):
            raise ConfigError(f"{EXTENSIONS_KEY}={ext!r}: must be a list of extension names "
                              f"(known: {', '.join(EXTENSIONS)})")
        object.__setattr__(self, "extensions", tuple(sorted(set(ext))))
        ov = self.compute_overlap
        if isinstance(ov, bool) or not isinstance(ov, int) or ov not in (0, 1):
            raise ConfigError(f"{OVERLAP_KEY}={ov!r}: must be 0 (one compute lane, TVM's VTA) "
                              f"or 1 (ALU lane beside the GEMM lane)")
        us = self.uop_stream
        if isinstance(us, bool) or not isinstance(us, int) or us not in (0, 1):
            raise ConfigError(f"{UOP_STREAM_KEY}={us!r}: must be 0 (a LOAD UOP holds the compute "
                              f"module, TVM's VTA) or 1 (LOAD UOP streamed beside the "
                              f"instructions after it)")
        self._validate()

    def has_extension(self, name: str) -> bool:
        """Whether the ISA extension ``name`` (a key of :data:`~vtakit.hw.spec.EXTENSIONS`)
        is enabled."""
        if name not in EXTENSIONS:
            raise ConfigError(f"unknown ISA extension {name!r}; known extensions are "
                              f"{', '.join(EXTENSIONS)}")
        return name in self.extensions

    # ---------------------------------------------------------------- loading

    @classmethod
    def from_dict(cls, values: dict, *, source: str = "config") -> "VTAConfig":
        """Build from a ``vta_config.json`` dictionary (TVM key names)."""
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: expected a JSON object of VTA keys, got {type(values).__name__}")
        unknown = [k for k in values
                   if k not in _KEYS and k not in (EXTENSIONS_KEY, OVERLAP_KEY, UOP_STREAM_KEY)
                   and k not in _DERIVED and k not in _LABELS]
        if unknown:
            raise ConfigError(
                f"{source}: unknown key {unknown[0]!r}; valid keys are {', '.join(_KEYS)} "
                f"(and the optional {EXTENSIONS_KEY}, {OVERLAP_KEY} and {UOP_STREAM_KEY})")
        kwargs = {}
        if OVERLAP_KEY in values:
            ov = values[OVERLAP_KEY]
            if isinstance(ov, bool) or not isinstance(ov, int) or ov not in (0, 1):
                raise ConfigError(f"{source}: {OVERLAP_KEY} must be 0 or 1 (1: the compute "
                                  f"module's ALU lane beside its GEMM lane), got {ov!r}")
            kwargs["compute_overlap"] = ov
        if UOP_STREAM_KEY in values:
            us = values[UOP_STREAM_KEY]
            if isinstance(us, bool) or not isinstance(us, int) or us not in (0, 1):
                raise ConfigError(f"{source}: {UOP_STREAM_KEY} must be 0 or 1 (1: the compute "
                                  f"module streams a LOAD UOP beside the instructions after "
                                  f"it), got {us!r}")
            kwargs["uop_stream"] = us
        if EXTENSIONS_KEY in values:
            ext = values[EXTENSIONS_KEY]
            if not isinstance(ext, list) or not all(isinstance(e, str) for e in ext):
                raise ConfigError(f"{source}: {EXTENSIONS_KEY} must be a list of extension "
                                  f"names (known: {', '.join(EXTENSIONS)}), got {ext!r}")
            kwargs["extensions"] = tuple(ext)
        for key, value in values.items():
            if key not in _KEYS:
                continue
            name = _KEYS[key]
            if name in ("target", "hw_ver"):
                if not isinstance(value, str):
                    raise ConfigError(f"{source}: {key} must be a string, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{source}: {key} must be an integer, got {value!r}")
            kwargs[name] = value
        # Like TVM's vta_config.json, a config names every key: a partial file is an
        # error rather than silently completed from the default design.
        missing = [k for k in _KEYS if k not in values]
        if missing:
            raise ConfigError(
                f"{source}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                f"a vta_config.json sets all {len(_KEYS)} keys (copy one of "
                f"vtakit/hw/presets/*.json)")
        try:
            config = cls(**kwargs)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None
        for key in _DERIVED:
            if key in values and values[key] != getattr(config, key):
                raise ConfigError(
                    f"{source}: {key}={values[key]!r} does not match the keys, which give "
                    f"{key}={getattr(config, key)!r}; derived parameters cannot be set: drop "
                    f"{key} (or change the LOG_* key it follows from)")
        return config

    @classmethod
    def from_json(cls, path) -> "VTAConfig":
        """Load a TVM-style ``vta_config.json`` file."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as e:
            raise ConfigError(f"{path}: cannot read config file ({e.strerror})") from None
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
        return cls.from_dict(values, source=str(path))

    @classmethod
    def preset(cls, name: str) -> "VTAConfig":
        """One of the shipped presets (see :data:`PRESETS`)."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; presets are {', '.join(PRESETS)}")
        text = resources.files("vtakit.hw").joinpath("presets", f"{name}.json").read_text()
        return cls.from_dict(json.loads(text), source=f"preset {name!r}")

    def to_dict(self) -> dict:
        """The ``vta_config.json`` dictionary (TVM key names), with ``"EXTENSIONS"`` last
        when the config enables any (a base config's dictionary is TVM's exactly)."""
        out = {key: getattr(self, name) for key, name in _KEYS.items()}
        if self.extensions:
            out[EXTENSIONS_KEY] = list(self.extensions)
        if self.compute_overlap:
            out[OVERLAP_KEY] = self.compute_overlap
        if self.uop_stream:
            out[UOP_STREAM_KEY] = self.uop_stream
        return out

    # ------------------------------------------------------------- validation

    def _validate(self):
        def fail(key, msg):
            raise ConfigError(f"{key}={self.to_dict()[key]!r}: {msg}")

        if self.target not in BUS_WIDTH_BY_TARGET:
            fail("TARGET", f"unknown target; expected one of {', '.join(BUS_WIDTH_BY_TARGET)}")
        if self.hw_ver != SUPPORTED_HW_VER:
            fail("HW_VER", f"only the HW_VER {SUPPORTED_HW_VER} ISA is supported")
        for ext in self.extensions:
            if ext not in EXTENSIONS:
                raise ConfigError(
                    f"{EXTENSIONS_KEY}={list(self.extensions)!r}: unknown extension {ext!r}; "
                    "known extensions are " + ", ".join(f"{k} ({v})" for k, v in EXTENSIONS.items()))
        for pair, why in EXTENSION_CONFLICTS.items():
            if pair <= set(self.extensions):
                raise ConfigError(f"{EXTENSIONS_KEY}={list(self.extensions)!r}: "
                                  f"{' and '.join(sorted(pair))} cannot be enabled together: {why}")
        for key, name in _KEYS.items():
            if name.startswith("log_") and (isinstance(getattr(self, name), bool)
                                            or not isinstance(getattr(self, name), int)):
                fail(key, "must be an integer")
        if self.log_inp_width != 3:
            fail("LOG_INP_WIDTH", "vtakit supports 8-bit inputs only (LOG_INP_WIDTH=3)")
        if self.log_wgt_width != 3:
            fail("LOG_WGT_WIDTH", "vtakit supports 8-bit weights only (LOG_WGT_WIDTH=3)")
        if self.log_acc_width != 5:
            fail("LOG_ACC_WIDTH", "vtakit supports 32-bit accumulators only (LOG_ACC_WIDTH=5)")
        if not 0 <= self.log_batch <= 4:
            fail("LOG_BATCH", "must be in 0..4")
        if not 1 <= self.log_block <= 6:
            fail("LOG_BLOCK", "must be in 1..6")
        if self.inp_elem_bits < self.bus_width:
            fail("LOG_BLOCK", f"an input element of BATCH*BLOCK*8 = {self.inp_elem_bits} bits is "
                 f"narrower than the {self.bus_width}-bit DRAM bus of TARGET {self.target!r}; "
                 f"need LOG_BATCH+LOG_BLOCK >= {self.log_bus_width - 3}")

        for key, log_depth, elem in (
            ("LOG_UOP_BUFF_SIZE", self.log_uop_depth, "micro-op (4 B)"),
            ("LOG_INP_BUFF_SIZE", self.log_inp_depth, f"input ({self.inp_elem_bytes} B)"),
            ("LOG_WGT_BUFF_SIZE", self.log_wgt_depth, f"weight ({self.wgt_elem_bytes} B)"),
            ("LOG_ACC_BUFF_SIZE", self.log_acc_depth, f"accumulator ({self.acc_elem_bytes} B)"),
        ):
            if log_depth < 1:
                fail(key, f"the buffer holds fewer than two {elem} elements")
            if log_depth > SRAM_BASE_BITS:
                fail(key, f"buffer depth 2^{log_depth} exceeds the 16-bit sram_base field")

        # Instruction word 0 of GEMM/ALU: 3+4+1 header bits, uop_bgn (U), uop_end (U+1),
        # iter_out and iter_in (14 each) must share one 64-bit unit.
        u = self.log_uop_depth
        header = OPCODE_BITS + len(DEP_FLAGS) + 1     # + reset_reg
        if header + u + (u + 1) + 2 * LOOP_ITER_BITS > ENCODING_UNIT_BITS:
            fail("LOG_UOP_BUFF_SIZE", f"a uop depth of 2^{u} needs {u}-bit uop_bgn and "
                 f"{u + 1}-bit uop_end; GEMM/ALU word 0 allows at most 2^13 uops "
                 "(LOG_UOP_BUFF_SIZE <= 15)")
        a, i, w = self.log_acc_depth, self.log_inp_depth, self.log_wgt_depth
        if 4 * a + ALU_OPCODE_BITS + 1 + IMM_BITS > ENCODING_UNIT_BITS:
            fail("LOG_ACC_BUFF_SIZE", f"an acc depth of 2^{a} needs {a}-bit indices; the ALU "
                 f"instruction's four index factors, opcode and immediate need 4*{a}+20 = "
                 f"{4 * a + 20} bits > 64 (at most 11 index bits)")
        if 2 * (a + i + w) > 64:
            raise ConfigError(
                f"GEMM instruction overflows 128 bits: its factor fields need 2*(A+I+W) = "
                f"2*({a}+{i}+{w}) = {2 * (a + i + w)} bits > 64 (A from "
                f"LOG_ACC_BUFF_SIZE={self.log_acc_buff_size}, I from "
                f"LOG_INP_BUFF_SIZE={self.log_inp_buff_size}, W from "
                f"LOG_WGT_BUFF_SIZE={self.log_wgt_buff_size})")
        if a + max(a, i) + w > UOP_BITS:
            raise ConfigError(
                f"micro-op overflows 32 bits: dst ({a}) + src ({max(a, i)}) + wgt ({w}) index "
                f"bits = {a + max(a, i) + w} (A from LOG_ACC_BUFF_SIZE={self.log_acc_buff_size}, "
                f"I from LOG_INP_BUFF_SIZE={self.log_inp_buff_size}, W from "
                f"LOG_WGT_BUFF_SIZE={self.log_wgt_buff_size})")

    # ------------------------------------------------------ derived quantities

    @property
    def log_block_in(self) -> int:
        return self.log_block

    @property
    def log_block_out(self) -> int:
        return self.log_block

    @property
    def log_out_width(self) -> int:
        return self.log_inp_width

    @property
    def log_out_buff_size(self) -> int:
        return self.log_acc_buff_size + self.log_out_width - self.log_acc_width

    @property
    def log_bus_width(self) -> int:
        return BUS_WIDTH_BY_TARGET[self.target]

    @property
    def bus_width(self) -> int:
        """DRAM bus width in bits."""
        return 1 << self.log_bus_width

    @property
    def bus_bytes(self) -> int:
        return self.bus_width // 8

    inp_width = property(lambda self: 1 << self.log_inp_width)
    wgt_width = property(lambda self: 1 << self.log_wgt_width)
    acc_width = property(lambda self: 1 << self.log_acc_width)
    out_width = property(lambda self: 1 << self.log_out_width)
    batch = property(lambda self: 1 << self.log_batch)
    block_in = property(lambda self: 1 << self.log_block_in)
    block_out = property(lambda self: 1 << self.log_block_out)
    block = property(lambda self: 1 << self.log_block)

    @property
    def inp_elem_bits(self) -> int:
        return self.inp_width * self.batch * self.block_in

    @property
    def wgt_elem_bits(self) -> int:
        return self.wgt_width * self.block_out * self.block_in

    @property
    def acc_elem_bits(self) -> int:
        return self.acc_width * self.batch * self.block_out

    @property
    def out_elem_bits(self) -> int:
        return self.out_width * self.batch * self.block_out

    uop_elem_bits = UOP_BITS
    insn_bits = INSN_BITS
    uop_elem_bytes = UOP_BITS // 8
    insn_bytes = INSN_BITS // 8
    inp_elem_bytes = property(lambda self: self.inp_elem_bits // 8)
    wgt_elem_bytes = property(lambda self: self.wgt_elem_bits // 8)
    acc_elem_bytes = property(lambda self: self.acc_elem_bits // 8)
    out_elem_bytes = property(lambda self: self.out_elem_bits // 8)

    @property
    def log_uop_depth(self) -> int:
        return self.log_uop_buff_size - 5 + 3

    @property
    def log_inp_depth(self) -> int:
        return self.log_inp_buff_size - self.log_batch - self.log_block_in - self.log_inp_width + 3

    @property
    def log_wgt_depth(self) -> int:
        return self.log_wgt_buff_size - self.log_block_out - self.log_block_in - self.log_wgt_width + 3

    @property
    def log_acc_depth(self) -> int:
        return self.log_acc_buff_size - self.log_batch - self.log_block_out - self.log_acc_width + 3

    log_out_depth = property(lambda self: self.log_acc_depth)
    uop_depth = property(lambda self: 1 << self.log_uop_depth)
    inp_depth = property(lambda self: 1 << self.log_inp_depth)
    wgt_depth = property(lambda self: 1 << self.log_wgt_depth)
    acc_depth = property(lambda self: 1 << self.log_acc_depth)
    out_depth = property(lambda self: 1 << self.log_out_depth)

    @property
    def inp_axi_ratio(self) -> int:
        return self.inp_elem_bits // self.bus_width

    @property
    def wgt_axi_ratio(self) -> int:
        return self.wgt_elem_bits // self.bus_width

    @property
    def acc_axi_ratio(self) -> int:
        return self.acc_elem_bits // self.bus_width

    @property
    def out_axi_ratio(self) -> int:
        return self.out_elem_bits // self.bus_width

    @property
    def macs_per_cycle(self) -> int:
        """Peak GEMM MACs per cycle (BATCH * BLOCK_IN * BLOCK_OUT)."""
        return self.batch * self.block_in * self.block_out

    @property
    def name(self) -> str:
        """Bitstream/config name, e.g. ``1x16_i8w8a32_15_15_18_17``; each enabled ISA
        extension adds ``+name`` (``1x16_i8w8a32_15_15_18_17+requant``), and
        ``COMPUTE_OVERLAP`` adds ``+overlap``, ``UOP_STREAM`` ``+uopstream``."""
        return (f"{self.batch}x{self.block}_i{self.inp_width}w{self.wgt_width}a{self.acc_width}"
                f"_{self.log_uop_buff_size}_{self.log_inp_buff_size}"
                f"_{self.log_wgt_buff_size}_{self.log_acc_buff_size}"
                + "".join(f"+{e}" for e in self.extensions)
                + (f"+{OVERLAP_SPEC}" if self.compute_overlap else "")
                + (f"+{UOP_STREAM_SPEC}" if self.uop_stream else ""))

    @property
    def model(self) -> str:
        """TVM's ``env.MODEL``: ``TARGET_name``."""
        return f"{self.target}_{self.name}"

    def elem_bytes(self, mem_type) -> int:
        """SRAM element bytes of a memory type (an ``isa.MemType`` or its int value)."""
        return _by_mem_type(self)[0][int(mem_type)]

    def depth(self, mem_type) -> int:
        """SRAM depth (elements) of a memory type."""
        return _by_mem_type(self)[1][int(mem_type)]

    def derived(self) -> dict:
        """Every key and derived parameter, as a JSON-ready dictionary."""
        out = {"name": self.name, "model": self.model, **self.to_dict()}
        for attr in _DERIVED:
            out[attr] = getattr(self, attr)
        return out

    def replace(self, **changes) -> "VTAConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


@lru_cache(maxsize=64)
def _by_mem_type(config: VTAConfig) -> tuple[dict, dict]:
    """(element bytes, depth) by memory type value, computed once per config."""
    c = config
    return ({0: c.uop_elem_bytes, 1: c.wgt_elem_bytes, 2: c.inp_elem_bytes,
             3: c.acc_elem_bytes, 4: c.out_elem_bytes},
            {0: c.uop_depth, 1: c.wgt_depth, 2: c.inp_depth, 3: c.acc_depth, 4: c.out_depth})


def extension_note(built: VTAConfig, target: VTAConfig) -> str:
    """What to append to a "built for config A, not B" message when A enables ISA
    extensions that B lacks (``""`` otherwise): code built for A may use their opcodes."""
    missing = [e for e in built.extensions if e not in target.extensions]
    if not missing:
        return ""
    return (f"; it uses the ISA extension{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}, which config {target.name} does not have (run it on "
            f"hardware built with \"EXTENSIONS\": {list(built.extensions)!r})".replace("'", '"'))


def load_config(spec) -> VTAConfig:
    """A config from a preset name, a JSON file path, a dict or a :class:`VTAConfig`; a
    name or file with ``+EXT`` appended enables ISA extensions (:func:`config_from_spec`,
    e.g. ``tiny+requant2``)."""
    if isinstance(spec, VTAConfig):
        return spec
    if isinstance(spec, dict):
        return VTAConfig.from_dict(spec)
    spec = str(spec)
    if spec in PRESETS:
        return VTAConfig.preset(spec)
    path = Path(spec)
    if path.suffix == ".json" or path.exists():
        return VTAConfig.from_json(path)
    if "+" in spec:
        return config_from_spec(spec)
    raise ConfigError(f"{spec!r} is neither a preset ({', '.join(PRESETS)}) nor a JSON file "
                      f"(NAME+EXT enables an ISA extension, e.g. tiny+requant)")


def config_from_spec(spec: str, named: dict | None = None) -> VTAConfig:
    """A config from ``NAME[+EXT...]`` (the benches' ``--configs`` items): ``NAME`` a
    preset, a JSON file or a key of ``named`` (extra configs by name), each ``+EXT``
    enabling an ISA extension (:data:`~vtakit.hw.spec.EXTENSIONS`), e.g. ``tiny+requant``.
    A JSON file whose name holds a ``+`` loads as it is."""
    spec = str(spec)
    named = named or {}
    if spec in named or spec in PRESETS or Path(spec).is_file():
        return named[spec] if spec in named else load_config(spec)
    base, *ext = spec.split("+")
    if not base or any(not e for e in ext):
        raise ConfigError(f"config {spec!r}: expected NAME or NAME+EXT[+EXT...] "
                          f"(e.g. tiny+requant)")
    config = named[base] if base in named else load_config(base)
    if OVERLAP_SPEC in ext and SERIAL_SPEC in ext:
        raise ConfigError(f"config {spec!r}: +{OVERLAP_SPEC} (two compute lanes) and "
                          f"+{SERIAL_SPEC} (one) contradict each other; give one of them")
    for word, value in ((OVERLAP_SPEC, 1), (SERIAL_SPEC, 0)):
        if word in ext:
            config = config.replace(compute_overlap=value)
            ext = [e for e in ext if e != word]
    if UOP_STREAM_SPEC in ext:
        config = config.replace(uop_stream=1)
        ext = [e for e in ext if e != UOP_STREAM_SPEC]
    if ext:
        config = config.replace(extensions=tuple(sorted({*config.extensions, *ext})))
    return config
