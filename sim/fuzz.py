"""Differential fuzzing of the backends: random legal programs, compared, shrunk.

:func:`fuzz` draws programs with :func:`~vtakit.sim.fuzz_gen.generate_program`,
runs each on every backend (a fresh device per program) and compares the outcomes
by the rule of :mod:`vtakit.runtime.compare` (the one ``vtakit compare`` uses): the
final DRAM, the counters the backends share and, for programs built to fault, the
fault (error code, module, instruction index). The behavioral model also runs
each program under a seeded random module interleaving: a result that depends
on the schedule would mean the generator made a race, and such a program is
skipped and counted (expected: none).

On a difference the program is shrunk by delta debugging over its actions
(every subset builds a legal program, see :mod:`~vtakit.sim.fuzz_program`) to a
minimal one that still differs, saved as a DRAM image, and reported with the
``vtakit compare`` command that replays it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..hw.config import load_config
from ..hw.errors import InputError
from ..runtime.compare import Outcome, compare_outcomes, run_outcome
from ..runtime.device import open_device
from ..runtime.image import DramImage
from ..runtime.progress import bar as progress_bar
from .fuzz_gen import generate_program

__all__ = ["run_program", "shrink", "fuzz", "FuzzReport", "Mismatch", "RTL_MAX_CYCLES",
           "format_summary"]

#: Cycle budget of an RTL run while fuzzing (a generated program needs far fewer).
RTL_MAX_CYCLES = 5_000_000

def _device_options(backend: str, options: dict) -> dict:
    opts = dict(options.get("*", {}))
    if backend != "behavioral":
        opts.setdefault("max_cycles", RTL_MAX_CYCLES)
        opts.setdefault("progress", False)
    opts.update(options.get(backend, {}))
    return opts


def run_program(image: DramImage, config, backend: str, options: dict | None = None) -> Outcome:
    """Run ``image`` on a fresh device of ``backend`` (its outcome, by the rule of
    :mod:`vtakit.runtime.compare`).

    ``options``: ``{backend or "*": {keyword: value}}`` device options. Errors opening
    the device (unknown backend or option, failed build) raise."""
    with open_device(backend, config, **_device_options(backend, options or {})) as dev:
        return run_outcome(dev, image, backend)


def _schedule_independent(image, config, reference: Outcome, seeds) -> bool:
    for seed in seeds:
        again = run_program(image, config, "behavioral", {"behavioral": {"interleave_seed": seed}})
        if not compare_outcomes(reference, again).equal:
            return False
    return True


def shrink(program, backends, options=None, *, progress=None) -> list:
    """The smallest sub-list of ``program.actions`` found (ddmin) on which
    ``backends[0]`` and ``backends[1]`` still differ."""
    config = program.config

    def differs(actions) -> bool:
        image, _ = program.build(actions)
        a = run_program(image, config, backends[0], options)
        b = run_program(image, config, backends[1], options)
        if progress is not None:
            progress.update()
        return not compare_outcomes(a, b).equal

    actions = list(program.actions)
    n = 2
    while len(actions) >= 2:
        chunk = -(-len(actions) // n)
        parts = [actions[i:i + chunk] for i in range(0, len(actions), chunk)]
        reduced = False
        for i, part in enumerate(parts):               # a part alone
            if differs(part):
                actions, n, reduced = part, 2, True
                break
        if not reduced:
            for i in range(len(parts)):                # everything but a part
                rest = [a for j, p in enumerate(parts) if j != i for a in p]
                if differs(rest):
                    actions, n, reduced = rest, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(actions):
                break
            n = min(len(actions), 2 * n)
    if len(actions) == 1 and differs([]):
        actions = []
    return actions


@dataclass
class Mismatch:
    """A program on which backends differ, shrunk and saved."""

    index: int
    seed: tuple
    description: str
    path: Path | None = None
    command: str = ""
    instructions: int = 0


@dataclass
class FuzzReport:
    """The result of a campaign: counts, coverage, mismatches, time per backend."""

    config: str
    backends: list
    programs: int = 0
    instructions: int = 0
    faulting: int = 0
    skipped_racy: int = 0
    coverage: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    touched: dict = field(default_factory=dict)
    mismatches: list = field(default_factory=list)
    wall: Counter = field(default_factory=Counter)


def fuzz(config, backends, count: int, seed: int = 0, *, token_depth: int = 256,
         options: dict | None = None, out_dir="vtakit-fuzz", shrink_failures: bool = True,
         max_failures: int = 1, size: int = 24, schedule_seeds=(1,),
         progress: bool = True) -> FuzzReport:
    """Run ``count`` random programs on every backend and compare them.

    Parameters
    ----------
    config : VTAConfig, preset name or JSON path
    backends : list of str
        Two or more; the first is the reference.
    count, seed : int
        Programs to draw and the campaign seed (program i uses the seed ``(seed, i)``).
    token_depth : int
        Token-queue capacity of every device.
    options : dict, optional
        ``{backend or "*": {keyword: value}}``: extra device options.
    out_dir : path
        Where shrunk reproducers are saved.
    shrink_failures : bool
        Shrink a differing program before saving it.
    max_failures : int
        Stop after this many differing programs.
    size : int
        Upper bound of the actions per program.
    schedule_seeds : sequence of int
        Behavioral interleave seeds each program's result must not depend on.
    progress : bool
        tqdm bar on stderr.
    """
    config_arg = config if isinstance(config, str) else None
    config = load_config(config)
    config_arg = config_arg or config.name
    backends = list(backends)
    if len(backends) < 2:
        raise InputError(f"fuzzing needs two or more backends, got {backends}")
    options = {"*": {"token_depth": token_depth}, **(options or {})}
    report = FuzzReport(config.name, backends)
    for b in backends:     # open each once first: an unknown backend or option fails now
        open_device(b, config, **_device_options(b, options)).close()
    bar = progress_bar(range(count), desc=f"fuzz {config.name}", unit="prog", enable=progress)
    for i in bar:
        rng = np.random.default_rng([seed, i])
        program = generate_program(config, rng, token_depth=token_depth, size=size)
        image, builder = program.build()
        outcomes = []
        for b in backends:
            outcomes.append(run_program(image, config, b, options))
            report.wall[b] += outcomes[-1].wall
        ref = outcomes[0]
        if ref.fault is None and backends[0] == "behavioral" and not _schedule_independent(
                image, config, ref, schedule_seeds):
            report.skipped_racy += 1
            continue
        report.programs += 1
        report.instructions += image.insn_count
        report.coverage.update(builder.stats)
        for name, hit in builder.touched.items():
            report.touched[name] = report.touched.get(name, 0) | hit
        if ref.fault is not None:
            report.faulting += 1
            report.faults[ref.fault.code] += 1
        diffs = [c for o in outcomes[1:] if not (c := compare_outcomes(ref, o)).equal]
        if not diffs:
            continue
        pair = [backends[0], diffs[0].other.backend]
        mismatch = Mismatch(i, (seed, i), diffs[0].line())
        actions = program.actions
        if shrink_failures:
            bar.set_postfix_str(f"shrinking program {i}")
            actions = shrink(program, pair, options)
        small, _ = program.build(actions)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        mismatch.path = small.save(out / f"fuzz-{config.name}-s{seed}-p{i}.npz")
        mismatch.instructions = small.insn_count
        depth = "" if token_depth == 256 else f" --token-depth {token_depth}"
        mismatch.command = (f"vtakit compare {mismatch.path} --config {config_arg} "
                            f"--backends {','.join(pair)}{depth}")
        extra = {k: v for k, v in (options or {}).items() if k in pair and v}
        if extra:
            mismatch.command += f"   # with device options {extra}"
        report.mismatches.append(mismatch)
        if len(report.mismatches) >= max_failures:
            break
    bar.close()
    return report


def format_summary(report: FuzzReport) -> str:
    """The coverage and result summary printed at the end of a campaign."""
    cov = report.coverage
    lines = [f"fuzz {report.config} on {','.join(report.backends)}: {report.programs} programs, "
             f"{report.instructions} instructions, {report.faulting} built to fault, "
             f"{len(report.mismatches)} mismatching, {report.skipped_racy} skipped "
             "(schedule-dependent)"]
    kinds = sorted((k, v) for k, v in cov.items()
                   if not k.startswith(("push ", "pop ", "illegal ", "late dep ")) and
                   "capacity" not in k and k not in ("nop", "chain", "longest token chain"))
    lines.append("  instructions: " + ", ".join(f"{k} {v}" for k, v in kinds))
    late = Counter()
    for k, v in cov.items():
        if k.startswith("late dep "):         # "late dep d{k} {same|across} {reader}"
            d, where, _ = k[9:].split()
            late[(where, int(d[1:]))] += v
    if late:
        lines.append("  late dependences (a reader d issue slots after a late micro-op): "
                     + "; ".join(f"{where} " + ", ".join(f"d{d} {late[(w, d)]}"
                                                         for w, d in sorted(late) if w == where)
                                 for where in ("same", "across")
                                 if any(w == where for w, _ in late)))
    lines.append("  tokens: " + ", ".join(f"{k} {v}" for k, v in sorted(cov.items())
                                          if k.startswith(("push ", "pop ")))
                 + f"; NOPs {cov['nop']}, chains {cov['chain']}, longest token chain "
                 f"{cov['longest token chain']} hops; queues at capacity: "
                 + (", ".join(f"{k} {v}" for k, v in sorted(cov.items()) if "capacity" in k)
                    or "none"))
    illegal = sorted((k[8:], v) for k, v in cov.items() if k.startswith("illegal "))
    lines.append("  illegal: " + (", ".join(f"{k} {v}" for k, v in illegal) or "none")
                 + "; faults: " + (", ".join(f"{k} {v}" for k, v in sorted(report.faults.items()))
                                   or "none"))
    lines.append("  SRAM entries touched: " + ", ".join(
        f"{k} {int(v.sum())}/{len(v)}" for k, v in sorted(report.touched.items())))
    lines.append("  run time: " + ", ".join(f"{b} {report.wall[b]:.1f} s" for b in report.backends))
    for m in report.mismatches:
        lines.append(f"MISMATCH program {m.index} (seed {m.seed}): {m.description}")
        lines.append(f"  shrunk to {m.instructions} instructions: {m.path}")
        lines.append(f"  replay: {m.command}")
    return "\n".join(lines)
