"""Which config fits a target: an estimate scaled from a measured report.

Synthesizing every candidate would take minutes each, so a config that does
not fit gets a suggestion computed from its own report: hard multipliers scale
with the MACs per cycle, block RAM with the SRAM bits, and logic and
flip-flops with ``FIXED_MACS + MACs`` (the control, DMA and queues cost about as
much logic as :data:`FIXED_MACS` MACs). The I/O harness's cost
is not scaled. The candidates are the presets and smaller variants of the
config (fewer batch rows, smaller blocks, all buffers shrunk by the same
factor); the suggestion is the one with the most MACs, then the most SRAM,
whose estimate fits every resource. It is an estimate: confirm it with
``vtakit synth``.
"""

from __future__ import annotations

from ..hw.config import PRESETS, ConfigError, VTAConfig
from .report import SynthReport
from .targets import RESOURCES, get_target

__all__ = ["estimate", "candidates", "suggest_fit", "sram_bits", "FIXED_MACS"]

#: Logic and flip-flops outside the GEMM array, in MAC equivalents: a straight line through
#: the tiny (64 MACs) and default (256 MACs) rows of bench/synth.py gives 143 (ECP5 LUTs),
#: 158 (ECP5 FFs), 239 (7-series LUTs) and 259 (iCE40 LUTs).
FIXED_MACS = 150
_BUFFERS = ("log_uop_buff_size", "log_inp_buff_size", "log_wgt_buff_size", "log_acc_buff_size")


def sram_bits(config: VTAConfig) -> int:
    """Bits of the uop, inp, wgt, acc and out buffers."""
    return 8 * sum(1 << v for v in (*(getattr(config, b) for b in _BUFFERS),
                                    config.log_out_buff_size))


def estimate(config: VTAConfig, reference: SynthReport, reference_config: VTAConfig) -> dict:
    """Resources of ``config`` on the reference's target, scaled from ``reference``."""
    macs = config.macs_per_cycle / reference_config.macs_per_cycle
    logic = ((FIXED_MACS + config.macs_per_cycle)
             / (FIXED_MACS + reference_config.macs_per_cycle))
    bits = sram_bits(config) / sram_bits(reference_config)
    out = {}
    for r in RESOURCES:
        fixed = reference.harness.get(r, 0)
        core = max(0, reference.resources[r] - fixed)
        scale = {"dsp": macs, "bram": bits}.get(r, logic)
        out[r] = round(fixed + core * scale, 1)
    return out


def candidates(config: VTAConfig) -> list:
    """Presets and legal shrunk variants of ``config``, largest first (MACs, then SRAM)."""
    found = {}
    for name in PRESETS:
        c = VTAConfig.preset(name)
        found.setdefault(c.name, (c, f"preset {name}"))
    for log_batch in range(config.log_batch, -1, -1):
        for log_block in range(config.log_block, 0, -1):
            for shrink in range(0, 9):
                try:
                    c = config.replace(log_batch=log_batch, log_block=log_block,
                                       **{b: getattr(config, b) - shrink for b in _BUFFERS})
                except ConfigError:
                    continue
                found.setdefault(c.name, (c, "a variant of the requested config"))
    return sorted(found.values(), key=lambda cv: (cv[0].macs_per_cycle, sram_bits(cv[0])),
                  reverse=True)


def suggest_fit(config: VTAConfig, report: SynthReport) -> str:
    """One line naming the largest config estimated to fit ``report``'s target."""
    target = get_target(report.target)

    def fits(est):
        return all(est[r] <= target.capacity[r] for r in RESOURCES)

    options = candidates(config)
    for cand, origin in options:
        est = estimate(cand, report, config)
        if fits(est):
            keys = ", ".join(f"{k}={v}" for k, v in cand.to_dict().items() if k.startswith("LOG_"))
            return (f"largest config estimated to fit: {cand.name} ({origin}: {keys}); about "
                    + ", ".join(f"{r} {est[r]:g}" for r in RESOURCES)
                    + "; confirm with vtakit synth")
    smallest = min(options, key=lambda cv: (cv[0].macs_per_cycle, sram_bits(cv[0])))[0]
    est = estimate(smallest, report, config)
    over = ", ".join(f"{r} {est[r]:g} > {target.capacity[r]}" for r in RESOURCES
                     if est[r] > target.capacity[r])
    return (f"no vtakit config is estimated to fit {target.name}: even the smallest, "
            f"{smallest.name}, needs about {over}")
