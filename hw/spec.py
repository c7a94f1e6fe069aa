"""The plain-Python part of the hardware contract: register map, error codes, module
numbers, DRAM address width and default queue depths.

No Amaranth here, so the behavioral model, the runtime and the simulator drivers can
use these without loading the HDL; :mod:`vtakit.hw.interfaces` re-exports them next to
the RTL signatures.
"""

import enum

__all__ = ["DRAM_ADDR_BITS", "DMA_BEATS_BITS", "DEFAULT_TOKEN_DEPTH", "DEFAULT_CMD_DEPTH",
           "Reg", "REGISTERS", "ErrorCode", "Module"]

#: Width of DRAM byte addresses on the DMA ports.
DRAM_ADDR_BITS = 32
DMA_BEATS_BITS = 16

#: Capacity of each dependency-token queue, unless a device is built with another.
DEFAULT_TOKEN_DEPTH = 256
#: Depth of each command queue (fetch -> load/compute/store).
DEFAULT_CMD_DEPTH = 64


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
    TOKEN_OVERFLOW = 5      # model only: a deadlock involving a full token queue
    DRAM_OUT_OF_RANGE = 6   # a DMA byte address beyond the 32-bit DRAM address space


class Module(enum.IntEnum):
    FETCH = 0
    LOAD = 1
    COMPUTE = 2
    STORE = 3
