"""Signatures that cross block boundaries inside the VTA RTL and at its top level.

Everything here is sized from a :class:`~vtakit.hw.config.VTAConfig`; blocks
connect only through these signatures (``lib.stream`` for handshaked transfers,
``lib.memory`` port signatures for SRAMs).

DRAM protocol (both the internal clients and the top-level master):

* A read is a ``req`` transfer (byte ``addr``, aligned to the bus width, and
  ``beats`` >= 1 bus words) followed by exactly ``beats`` ``data`` transfers,
  in order. Requests of one port complete in order.
* A write is a ``req`` transfer followed by exactly ``beats`` ``data`` transfers
  from the master. A write is complete, and visible to every later read, once
  its last data beat has been accepted.

Control/status registers (32 bits, byte offsets; see :data:`REGISTERS`).
"""


import enum

from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import INSN_BITS, VTAConfig

__all__ = [
    "DRAM_ADDR_BITS", "DMA_BEATS_BITS", "DmaRequest", "dma_read_signature", "dma_write_signature",
    "TokenSignature", "Command", "CommandSignature", "CsrSignature", "REGISTERS", "Reg",
    "ErrorCode", "ErrorReport", "Module", "DEFAULT_TOKEN_DEPTH", "DEFAULT_CMD_DEPTH",
]

DRAM_ADDR_BITS = 32
DMA_BEATS_BITS = 16

#: Capacity of each dependency-token queue, unless a device is built with another.
DEFAULT_TOKEN_DEPTH = 256
#: Depth of each command queue (fetch -> load/compute/store).
DEFAULT_CMD_DEPTH = 64


class DmaRequest(data.Struct):
    """A DRAM burst: byte address (bus aligned) and number of bus beats (>= 1)."""

    addr: DRAM_ADDR_BITS
    beats: DMA_BEATS_BITS


def dma_read_signature(config: VTAConfig) -> wiring.Signature:
    """A DRAM read port, from the master's side."""
    return wiring.Signature({
        "req": Out(stream.Signature(DmaRequest)),
        "data": In(stream.Signature(config.bus_width)),
    })


def dma_write_signature(config: VTAConfig) -> wiring.Signature:
    """A DRAM write port, from the master's side."""
    return wiring.Signature({
        "req": Out(stream.Signature(DmaRequest)),
        "data": Out(stream.Signature(config.bus_width)),
    })


#: One dependency token (the payload carries nothing; only the handshake counts).
TokenSignature = stream.Signature(unsigned(1))


class Command(data.Struct):
    """A dispatched instruction and its index in the stream (for error reports)."""

    insn: INSN_BITS
    index: 32


#: The fetch -> module command queues.
CommandSignature = stream.Signature(Command)

#: Control/status register bus, from the host's side. Reads are combinational
#: (``r_data`` shows the register at ``addr`` in the same cycle); a write takes
#: effect on the clock edge where ``w_en`` is high.
CsrSignature = wiring.Signature({
    "addr": Out(8),
    "w_en": Out(1),
    "w_data": Out(32),
    "r_data": In(32),
})


class Reg(enum.IntEnum):
    """Control/status register byte offsets."""

    CTRL = 0x00        # write bit0=1: start (ignored while busy). read: bit0 busy, bit1 done, bit2 error
    CYCLES = 0x04      # cycles from start to FINISH (counts while busy)
    INSN_COUNT = 0x08  # rw: number of instructions
    INSN_ADDR = 0x0C   # rw: byte address of the first instruction (16-byte aligned)
    ERROR_CODE = 0x10  # ErrorCode of the first fault, 0 if none
    ERROR_INSN = 0x14  # index (in the stream) of the faulting instruction
    ERROR_MODULE = 0x18  # Module that faulted
    LOAD_COUNT = 0x1C  # instructions completed by the load module
    GEMM_COUNT = 0x20  # GEMM micro-op executions (non-reset), as fsim's gemm_counter
    ALU_COUNT = 0x24   # ALU micro-op executions, as fsim's alu_counter
    STORE_COUNT = 0x28  # instructions completed by the store module


REGISTERS = {r.name: int(r) for r in Reg}


class ErrorCode(enum.IntEnum):
    NONE = 0
    ILLEGAL_OPCODE = 1
    ILLEGAL_MEMORY_TYPE = 2
    SRAM_OUT_OF_RANGE = 3
    ILLEGAL_FIELD = 4       # e.g. pads on a STORE, uop_end < uop_bgn, unsupported ALU opcode
    TOKEN_OVERFLOW = 5


class ErrorReport(data.Struct):
    """A module's fault: ``valid`` while the fault is reported, its ErrorCode and the
    index (in the instruction stream) of the faulting instruction."""

    valid: 1
    code: 4
    index: 32


class Module(enum.IntEnum):
    FETCH = 0
    LOAD = 1
    COMPUTE = 2
    STORE = 3
