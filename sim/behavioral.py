"""The behavioral model of VTA: the executable specification (backend ``behavioral``).

Fetch decodes the stream up to its first FINISH (instructions after it are
never dispatched) and dispatches each instruction into the bounded in-order
command queue of its module (reference 3.1). Fetch, load, compute and store run
as concurrent agents; the three modules exchange dependency tokens through four
bounded queues (reference 3.2): an instruction first pops (waiting while a
queue is empty), then does its work on the SRAMs (:mod:`vtakit.sim.datapath`),
then pushes (waiting while a queue is full). The run ends when compute
completes FINISH.

Scheduling is deterministic by default (each agent runs until it blocks, in
the order fetch, load, compute, store). With ``interleave_seed`` the scheduler
picks a seeded random ready agent at every step and runs it for a random
number of steps, so a stream with a missing dependency gives different results
for different seeds while a correctly synchronized stream gives the same result
for all of them.
"""

from __future__ import annotations

import random

from ..hw.isa import isa_for, unit_of
from ..hw.spec import (DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH, DEP_QUEUES, INSN_BYTES, PIPELINE,
                       TOKEN_QUEUES, ErrorCode, Opcode, Unit)
from ..runtime.device import Device, DeviceError, DeviceFault, RunResult, check_int_options
from .datapath import Counters, Fault, SRAMs

__all__ = ["BehavioralDevice"]

# Largest number of steps one turn runs in interleave mode.
_MAX_TURN = 4
# Distinct instruction words kept decoded across runs.
_DECODE_CACHE = 1 << 16


class _Agent:
    """One unit: its in-order instruction queue and where it stands in it."""

    def __init__(self, unit: Unit):
        self.unit = unit
        self.name = str(unit)
        self.queue: list = []       # (stream index, Insn), the whole run's share
        self.avail = 0              # how many of them fetch has dispatched
        self.pos = 0                # the head: the instruction being executed
        self.pending: list = []     # queues still to push for the head (work done)
        self.executed = 0

    @property
    def head(self):
        return self.queue[self.pos] if self.pos < self.avail else None

    @property
    def waiting(self) -> int:
        """Commands in the queue behind the head (the module holds its head)."""
        return max(0, self.avail - self.pos - 1)


class _Fetch:
    """The fetch module: dispatches ``stream`` in order into the agents' queues."""

    name = "fetch"

    def __init__(self, stream):
        self.stream = stream        # [(agent, stream index, Insn)]
        self.pos = 0


class BehavioralDevice(Device):
    """The numpy behavioral model of VTA.

    Parameters
    ----------
    config : VTAConfig, preset name or JSON path
    dram : DRAM, optional
    token_depth : int
        Capacity of each dependency-token queue (a push into a full queue stalls).
    cmd_depth : int or None
        Capacity of each command queue from fetch to a module, not counting the
        instruction the module is executing (fetch stalls on a full queue, as the
        RTL does); None for unbounded queues (fsim).
    interleave_seed : int, optional
        Seed of the random interleaving of the fetch, load, compute and store
        modules; None (default) schedules deterministically.

    Attributes
    ----------
    srams : SRAMs
        The on-chip memories; their contents persist across runs, like hardware.
    """

    name = "behavioral"
    keeps_sram = True      # one model / simulation / board for every run

    def __init__(self, config, *, dram=None, token_depth: int = DEFAULT_TOKEN_DEPTH,
                 interleave_seed: int | None = None, cmd_depth: int | None = DEFAULT_CMD_DEPTH):
        super().__init__(config, dram=dram)
        check_int_options(self.name, token_depth=token_depth, cmd_depth=cmd_depth,
                          interleave_seed=interleave_seed)
        if int(token_depth) < 1:
            raise DeviceError(f"token_depth must be at least 1, got {token_depth}")
        if cmd_depth is not None and int(cmd_depth) < 1:
            raise DeviceError(f"cmd_depth must be at least 1 (or None), got {cmd_depth}")
        self.token_depth = int(token_depth)
        self.cmd_depth = None if cmd_depth is None else int(cmd_depth)
        self.interleave_seed = interleave_seed
        self.isa = isa_for(self.config)
        self.srams = SRAMs(self.config)
        self._decoded: dict = {}

    # ------------------------------------------------------------------ errors

    def _error(self, unit: Unit, index: int, insn, code: ErrorCode, detail: str) -> DeviceFault:
        return DeviceFault(f"{unit} module, instruction {index}: {code.name}: {detail} "
                           f"[{insn}]", code, unit, index, insn)

    # --------------------------------------------------------------- fetch

    def _decode_stream(self, insn_addr: int, insn_count: int):
        """Read and decode the stream up to the first FINISH; returns the fetch agent
        and the load, compute and store agents."""
        n = INSN_BYTES
        if insn_count < 0:
            raise DeviceFault(f"fetch module: insn_count must be >= 0, got {insn_count}",
                              ErrorCode.ILLEGAL_FIELD, Unit.FETCH)
        if insn_addr % n:
            raise DeviceFault(f"fetch module: instruction address 0x{insn_addr:x} is not "
                              f"{n}-byte aligned", ErrorCode.ILLEGAL_FIELD, Unit.FETCH)
        end = insn_addr + n * insn_count
        if insn_addr < 0 or end > self.dram.size:
            raise DeviceFault(f"fetch module: DRAM_IMAGE: {insn_count} instructions at "
                              f"0x{insn_addr:x} end at 0x{end:x}, outside the image "
                              f"[0, 0x{self.dram.size:x})", ErrorCode.DRAM_IMAGE, Unit.FETCH)
        raw = self.dram.data[insn_addr:end].tobytes()
        agents = {unit: _Agent(unit) for unit in PIPELINE}
        finish = False
        decoded = self._decoded
        if len(decoded) > _DECODE_CACHE:
            decoded.clear()
        stream = []
        for index in range(insn_count):
            word = int.from_bytes(raw[n * index:n * index + n], "little")
            insn = decoded.get(word)
            if insn is None:    # streams repeat words a lot; decoded Insns are never mutated
                insn = decoded[word] = self.isa.decode(word)
            if not isinstance(insn.opcode, Opcode):
                raise self._error(Unit.FETCH, index, insn, ErrorCode.ILLEGAL_OPCODE,
                                  f"opcode {insn.opcode} is illegal; legal opcodes are "
                                  + ", ".join(f"{o.name}={o.value}" for o in Opcode))
            agent = agents[unit_of(insn)]
            agent.queue.append((index, insn))
            stream.append((agent, index, insn))
            if insn.opcode == Opcode.FINISH:
                finish = True
                break
        if not finish:
            raise DeviceFault(f"fetch module: the stream of {insn_count} instructions at "
                              f"0x{insn_addr:x} has no FINISH; a run ends only when compute "
                              "executes FINISH", ErrorCode.ILLEGAL_FIELD, Unit.FETCH)
        return _Fetch(stream), [agents[unit] for unit in PIPELINE]

    # ------------------------------------------------------------- modules

    def _flags(self, agent: _Agent, index: int, insn):
        """(pop queues, push queues) of an instruction on its module."""
        pops, pushes = [], []
        for flag, queue in DEP_QUEUES[agent.unit].items():
            if not insn.fields[flag]:
                continue
            if queue is None:
                raise self._error(agent.unit, index, insn, ErrorCode.ILLEGAL_FIELD,
                                  f"{flag} is set but the {agent.name} module has no "
                                  f"{'previous' if 'prev' in flag else 'next'} stage; "
                                  "it must be 0")
            (pops if flag.startswith("pop") else pushes).append(queue)
        return pops, pushes

    def _blocked_on(self, agent):
        """None if the agent can make a step, else why not: (token queue, "empty"/"full"),
        "fetch" (its queue is empty but more is coming) or "drained" (nothing left); for
        fetch: (target module agent, "full") or "drained"."""
        if isinstance(agent, _Fetch):
            if agent.pos == len(agent.stream):
                return "drained"
            target = agent.stream[agent.pos][0]
            if self.cmd_depth is not None and target.waiting >= self.cmd_depth:
                return (target, "full")
            return None
        if agent.pending:
            for q in agent.pending:
                if self._tokens[q] < self.token_depth:
                    return None
            return (agent.pending[0], "full")
        head = agent.head
        if head is None:
            return "fetch" if agent.avail < len(agent.queue) else "drained"
        pops, _ = self._flags(agent, *head)
        for q in pops:
            if self._tokens[q] == 0:
                return (q, "empty")
        return None

    def _step(self, agent: _Agent) -> bool:
        """Advance one agent by one step; False if it is blocked."""
        if self._blocked_on(agent) is not None:
            return False
        if isinstance(agent, _Fetch):
            agent.stream[agent.pos][0].avail += 1
            agent.pos += 1
            return True
        if agent.pending:
            agent.pending = [q for q in agent.pending if not self._push(q)]
            if not agent.pending:
                self._complete(agent)
            return True
        index, insn = agent.head
        pops, pushes = self._flags(agent, index, insn)
        for q in pops:
            self._tokens[q] -= 1
        self._execute(agent, index, insn)
        if self._finished:   # the run ends when FINISH completes; its push flags go nowhere
            agent.executed += 1
            return True
        agent.pending = [q for q in pushes if not self._push(q)]
        if not agent.pending:
            self._complete(agent)
        return True

    @staticmethod
    def _complete(agent: _Agent) -> None:
        """The head has done its work and its pushes: count it (as the RTL's
        per-module counters do) and move on."""
        agent.executed += 1
        agent.pos += 1

    def _push(self, queue: str) -> bool:
        if self._tokens[queue] >= self.token_depth:
            return False
        self._tokens[queue] += 1
        return True

    def _execute(self, agent: _Agent, index: int, insn) -> None:
        op = insn.opcode
        try:
            if op == Opcode.FINISH:
                self._finished = True
            elif insn.is_nop:
                pass
            elif op == Opcode.LOAD:
                self.srams.load(insn, self.dram.data, self._counters)
            elif op == Opcode.STORE:
                self.srams.store(insn, self.dram.data, self._counters)
            elif op == Opcode.GEMM:
                self.srams.gemm(insn, self._counters)
            else:
                self.srams.alu(insn, self._counters)
        except Fault as f:
            raise self._error(agent.unit, index, insn, f.code, f.detail) from None

    # ---------------------------------------------------------------- run

    def run(self, insn_addr: int, insn_count: int) -> RunResult:
        """Execute ``insn_count`` instructions at byte address ``insn_addr``.

        Returns ``RunResult(cycles=-1, stats)`` with fsim's counters and the
        number of instructions each unit executed. Raises
        :class:`~vtakit.runtime.device.DeviceFault` on any fault or deadlock.
        """
        fetch, modules = self._decode_stream(int(insn_addr), int(insn_count))
        self._tokens = dict.fromkeys(TOKEN_QUEUES, 0)
        self._counters = Counters()
        self._finished = False
        if self.cmd_depth is None:      # unbounded queues: dispatch everything now
            for a in modules:
                a.avail = len(a.queue)
            fetch.pos = len(fetch.stream)
        order = [fetch] + modules
        if self.interleave_seed is None:
            self._run_in_order(order)
        else:
            self._run_interleaved(order, random.Random(self.interleave_seed))
        if not self._finished:
            raise self._deadlock(order)
        stats = dict(self._counters)
        for a in modules:
            stats[f"{a.name}_insn_count"] = a.executed
        stats["insn_count"] = int(insn_count)
        return RunResult(cycles=-1, stats=stats)

    def _run_in_order(self, agents) -> None:
        progress = True
        while progress and not self._finished:
            progress = False
            for agent in agents:
                while not self._finished and self._step(agent):
                    progress = True

    def _run_interleaved(self, agents, rng: random.Random) -> None:
        while not self._finished:
            ready = [a for a in agents if self._blocked_on(a) is None]
            if not ready:
                return
            agent = rng.choice(ready)
            for _ in range(rng.randint(1, _MAX_TURN)):
                if self._finished or not self._step(agent):
                    break

    def _deadlock(self, agents) -> DeviceFault:
        parts = []
        for a in agents:
            why = self._blocked_on(a)
            if why == "drained":
                if not isinstance(a, _Fetch):
                    parts.append(f"{a.name} has no instructions left")
                continue
            if why == "fetch":
                parts.append(f"{a.name} waits for its next instruction from fetch")
                continue
            if isinstance(a, _Fetch):
                target, index, insn = a.stream[a.pos]
                parts.append(f"fetch waits to dispatch instruction {index} [{insn}] into the "
                             f"{target.name} command queue (full, {target.waiting}/"
                             f"{self.cmd_depth} commands)")
                continue
            queue, state = why
            index, insn = a.head
            verb = "push into" if state == "full" else "pop from"
            parts.append(f"{a.name} waits to {verb} {queue} ({state}, "
                         f"{self._tokens[queue]}/{self.token_depth} tokens) at "
                         f"instruction {index} [{insn}]")
        return DeviceFault("deadlock: no module can proceed before FINISH: " + "; ".join(parts),
                           ErrorCode.DEADLOCK)
