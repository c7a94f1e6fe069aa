"""The rule table of the VTA hardware contract, defined once (HW_VER 0.0.2).

Everything here is plain Python (no Amaranth, no numpy), the bottom layer that the
config, the ISA field tables, the RTL, the behavioral model, the runtime, the
compiler and the simulator drivers all import instead of restating a rule:

* the units (:class:`Unit`) and which unit executes which instruction
  (:func:`dispatch_unit`, reference 3.1);
* the four dependency-token queues and which queue each dependency flag of each
  unit pops from or pushes to (:data:`TOKEN_QUEUES`, :data:`DEP_QUEUES`, reference 3.2);
* the opcodes, memory types and ALU opcodes, and the ISA's limits: field widths,
  loop extents, pads, the ALU immediate and shift ranges, instruction and micro-op sizes;
* the control/status register map, the error codes and the default queue depths.
"""

import enum

__all__ = [
    "Unit", "PIPELINE", "Opcode", "MemType", "AluOp", "EXTENSIONS", "EXTENSION_CONFLICTS",
    "LOAD_UNIT_MEM_TYPES",
    "dispatch_unit",
    "DEP_FLAGS", "TOKEN_QUEUES", "DEP_QUEUES",
    "INSN_BITS", "INSN_BYTES", "UOP_BITS", "UOP_BYTES", "OPCODE_BITS", "ENCODING_UNIT_BITS",
    "MEM_TYPE_BITS", "SRAM_BASE_BITS", "DRAM_BASE_BITS", "XFER_BITS", "PAD_BITS", "MAX_PAD",
    "LOOP_ITER_BITS", "MAX_LOOP_EXTENT", "ALU_OPCODE_BITS", "IMM_BITS", "IMM_MIN", "IMM_MAX",
    "SHIFT_LIMIT",
    "DRAM_ADDR_BITS", "DMA_BEATS_BITS", "DEFAULT_TOKEN_DEPTH", "DEFAULT_CMD_DEPTH",
    "DMA_READ_AHEAD_BEATS", "WRITE_AHEAD",
    "Reg", "REGISTERS", "TOKEN_LEVEL_FIELDS", "CMD_LEVEL_FIELDS", "ErrorCode",
]


# ------------------------------------------------------------------------ units

class Unit(enum.IntEnum):
    """The four units of VTA; the values are the RTL's ERROR_MODULE numbers.

    ``str(unit)`` is the lower-case name used in messages (``"compute"``)."""

    FETCH = 0
    LOAD = 1
    COMPUTE = 2
    STORE = 3

    def __str__(self):
        return self.name.lower()


#: The units that exchange dependency tokens, in pipeline order: a unit's "prev"
#: neighbour is the one before it here, its "next" neighbour the one after.
PIPELINE = (Unit.LOAD, Unit.COMPUTE, Unit.STORE)


# ------------------------------------------------------------------ instructions

class Opcode(enum.IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(enum.IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4


class AluOp(enum.IntEnum):
    """ALU opcodes (their semantics: :data:`vtakit.hw.isa.ALU_OPS`). 0..3 are HW_VER 0.0.2;
    5..7 belong to the ``requant`` extension and 4 to the ``requant2`` extension
    (:data:`EXTENSIONS`; later TVM VTA uses 4 for MUL, which no vtakit config has)."""

    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    REQ = 4
    SRDHM = 5
    RSHR = 6
    MULSHR = 7


#: The ISA extensions a config may enable (``"EXTENSIONS"`` key), name -> what it adds.
#: Without any, the ISA is exactly HW_VER 0.0.2.
EXTENSIONS = {
    "requant": "exact TFLite requantization: ALU SRDHM, RSHR and MULSHR",
    "requant2": "exact TFLite requantization in one micro-op per output vector: ALU REQ "
                "with per-lane multiplier and parameter registers",
}

#: Extensions that cannot be enabled together (both give a meaning to the same hardware),
#: each pair with the reason.
EXTENSION_CONFLICTS = {
    frozenset({"requant", "requant2"}): "they are two designs of the same requantize "
                                        "(requant: SRDHM/RSHR/MULSHR passes; requant2: REQ); "
                                        "pick one",
}


#: Memory types whose LOADs go to the load unit; every other LOAD goes to compute.
LOAD_UNIT_MEM_TYPES = (MemType.INP, MemType.WGT)


def dispatch_unit(opcode, memory_type=None) -> Unit:
    """The unit fetch dispatches an instruction to (reference 3.1): STORE to store,
    LOAD INP/WGT to load, everything else (LOAD UOP/ACC, GEMM, ALU, FINISH) to compute."""
    if opcode == Opcode.STORE:
        return Unit.STORE
    if opcode == Opcode.LOAD and memory_type in LOAD_UNIT_MEM_TYPES:
        return Unit.LOAD
    return Unit.COMPUTE


# ---------------------------------------------------------------- token queues

#: The dependency flags, bits 3..6 of every instruction.
DEP_FLAGS = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")

#: Dependency-token queues: name -> (producer unit, consumer unit).
TOKEN_QUEUES = {
    "l2g": (Unit.LOAD, Unit.COMPUTE),
    "g2l": (Unit.COMPUTE, Unit.LOAD),
    "g2s": (Unit.COMPUTE, Unit.STORE),
    "s2g": (Unit.STORE, Unit.COMPUTE),
}


def _dep_queues() -> dict:
    by_pair = {pair: name for name, pair in TOKEN_QUEUES.items()}
    table = {}
    for k, unit in enumerate(PIPELINE):
        prev = PIPELINE[k - 1] if k > 0 else None
        next_ = PIPELINE[k + 1] if k + 1 < len(PIPELINE) else None
        table[unit] = {
            "pop_prev_dep": by_pair.get((prev, unit)),
            "pop_next_dep": by_pair.get((next_, unit)),
            "push_prev_dep": by_pair.get((unit, prev)),
            "push_next_dep": by_pair.get((unit, next_)),
        }
    return table


#: Which token queue each dependency flag pops from / pushes to, per unit (reference
#: 3.2); None where the unit has no such neighbour (the flag must then be 0).
DEP_QUEUES = _dep_queues()


# ------------------------------------------------------------------- ISA limits

#: Instruction word width and size (instructions are 16-byte aligned in DRAM).
INSN_BITS = 128
INSN_BYTES = INSN_BITS // 8
#: Micro-op word width and size.
UOP_BITS = 32
UOP_BYTES = UOP_BITS // 8
#: Width of the opcode field (bits 0..2); opcodes 5..7 are illegal.
OPCODE_BITS = 3
#: Storage unit of the instruction packing rule: a field never straddles one.
ENCODING_UNIT_BITS = 64

#: LOAD/STORE fields.
MEM_TYPE_BITS = 3
SRAM_BASE_BITS = 16
DRAM_BASE_BITS = 32
#: y_size, x_size and x_stride.
XFER_BITS = 16
PAD_BITS = 4
MAX_PAD = (1 << PAD_BITS) - 1

#: GEMM/ALU loop fields: iter_out and iter_in.
LOOP_ITER_BITS = 14
MAX_LOOP_EXTENT = (1 << LOOP_ITER_BITS) - 1

#: ALU fields: the opcode and the signed immediate.
ALU_OPCODE_BITS = 3
IMM_BITS = 16
IMM_MIN = -(1 << (IMM_BITS - 1))
IMM_MAX = (1 << (IMM_BITS - 1)) - 1
#: SHR takes an immediate k with |k| <= SHIFT_LIMIT (negative = left shift); the
#: accumulators are 32 bits wide, so a larger shift is meaningless and is illegal.
SHIFT_LIMIT = 31


# ------------------------------------------------------------ the device contract

#: Width of DRAM byte addresses on the DMA ports.
DRAM_ADDR_BITS = 32
DMA_BEATS_BITS = 16

#: Capacity of each dependency-token queue, unless a device is built with another.
DEFAULT_TOKEN_DEPTH = 256
#: Depth of each command queue (fetch -> load/compute/store).
DEFAULT_CMD_DEPTH = 64
#: The DRAM read arbiter issues a request only while at most this many requested beats
#: have not returned yet (:class:`~vtakit.hw.dma.DmaReadArbiter`): enough to hide a DRAM
#: latency of as many cycles, and the most a compute-module LOAD waits behind the load
#: module's bursts (plus one burst).
DMA_READ_AHEAD_BEATS = 64
#: Write request-ahead: the DRAM models and the board's DRAM bridges accept up to this
#: many write requests beyond the one whose beats are being transferred (the beats
#: follow the requests in order), so a master's next burst needs no request cycle of
#: its own; the write arbiter issues as many ahead
#: (:class:`~vtakit.hw.dma.DmaWriteArbiter`).
WRITE_AHEAD = 1


class Reg(enum.IntEnum):
    """Control/status register byte offsets."""

    CTRL = 0x00        # write bit0=1: start (ignored while busy). read: bit0 busy, bit1 done, bit2 error
    CYCLES = 0x04      # cycles from start to FINISH (counts while busy)
    INSN_COUNT = 0x08  # rw: number of instructions
    INSN_ADDR = 0x0C   # rw: byte address of the first instruction (16-byte aligned)
    ERROR_CODE = 0x10  # ErrorCode of the first fault, 0 if none
    ERROR_INSN = 0x14  # index (in the stream) of the faulting instruction
    ERROR_MODULE = 0x18  # Unit that faulted
    LOAD_COUNT = 0x1C  # instructions completed by the load unit
    GEMM_COUNT = 0x20  # GEMM micro-op executions (non-reset), as fsim's gemm_counter
    ALU_COUNT = 0x24   # ALU micro-op executions, as fsim's alu_counter
    STORE_COUNT = 0x28  # instructions completed by the store unit
    # Read-only debug registers: where each unit stands (live values), so a simulator
    # harness or a board driver can tell a deadlock from a long run and report it.
    UNIT_STATE = 0x2C  # bit u: Unit u holds an instruction (fetch: fetching; compute: cmd not ready)
    TOKEN_LEVELS_0 = 0x30  # tokens in l2g (bits 0..15) and g2l (bits 16..31), saturating
    TOKEN_LEVELS_1 = 0x34  # tokens in g2s (bits 0..15) and s2g (bits 16..31), saturating
    CMD_LEVELS = 0x38  # commands queued for load, compute, store (8 bits each, saturating)
    UOP_COUNT = 0x3C   # micro-ops compute executed (GEMM with or without reset, ALU)


REGISTERS = {r.name: int(r) for r in Reg}

#: Which queue each field of TOKEN_LEVELS_0/1 and CMD_LEVELS reports: (register, lsb, width).
TOKEN_LEVEL_FIELDS = {name: (Reg.TOKEN_LEVELS_0 if k < 2 else Reg.TOKEN_LEVELS_1, 16 * (k % 2), 16)
                      for k, name in enumerate(TOKEN_QUEUES)}
CMD_LEVEL_FIELDS = {unit: (Reg.CMD_LEVELS, 8 * k, 8) for k, unit in enumerate(PIPELINE)}


class ErrorCode(enum.IntEnum):
    """Why a run stopped. Codes below 16 are the RTL's ERROR_CODE values; the others
    have no register value: the simulators report them (every backend alike)."""

    NONE = 0
    ILLEGAL_OPCODE = 1
    ILLEGAL_MEMORY_TYPE = 2
    SRAM_OUT_OF_RANGE = 3
    ILLEGAL_FIELD = 4       # e.g. pads on a STORE, uop_end < uop_bgn, unsupported ALU opcode
    DRAM_OUT_OF_RANGE = 6   # a DMA byte address beyond the 32-bit DRAM address space
    # -- reported by the simulators, not by the RTL --
    DRAM_IMAGE = 16         # an access inside the 32-bit space but beyond the simulated DRAM
    DEADLOCK = 17           # no unit can make progress before FINISH
    TIMEOUT = 18            # no FINISH within the run's cycle budget
