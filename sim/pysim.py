"""The ``pysim`` backend: the VTA RTL on Amaranth's Python simulator.

:class:`DramPortModel` serves the top level's DRAM read and write ports from a
numpy byte image (one process, configurable read latency); :class:`PysimDevice`
drives the control/status registers like a host driver would (instruction
count and address, start, poll for done) and turns the latched error registers
into a :class:`~vtakit.runtime.device.DeviceFault`.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..hw.errors import InputError
from ..hw.config import load_config
from ..hw.spec import WRITE_AHEAD, ErrorCode
from ..runtime.device import Device, DeviceError, DeviceFault, RunResult, check_int_options
from ..runtime.dram import DRAM
from ..runtime.progress import bar as progress_bar

__all__ = ["DramPortModel", "PysimDevice"]


class DramPortModel:
    """A DRAM behind the DMA protocol of :mod:`vtakit.hw.interfaces`, for async testbenches.

    Reads: a request is accepted every cycle (any number outstanding); its beats
    are returned in order, the first ``read_latency`` cycles after the request,
    then one per cycle while the master is ready. Writes: one beat per cycle, from
    the cycle after the burst's request; the next request is accepted while the
    current burst's beats stream (:data:`~vtakit.hw.spec.WRITE_AHEAD` requests
    ahead of it). An access outside the image is recorded in :attr:`fault`
    (a read is then never answered, a write's beats are dropped), so the
    simulation stays consistent and the driver can report it.

    Parameters
    ----------
    memory : numpy.ndarray or callable
        The ``uint8`` byte image, or a function returning it (for images that
        may be reallocated between runs, like :attr:`DRAM.data`).
    bus_bytes : int
        Bus width in bytes.
    read_latency : int
        Cycles from an accepted read request to its first data beat (>= 1).

    Attributes
    ----------
    reads, writes : int
        Beats transferred so far (for throughput checks).
    fault : str or None
        The first access outside the image since :meth:`clear`.
    """

    def __init__(self, memory, bus_bytes: int, *, read_latency: int = 1):
        if read_latency < 1:
            raise InputError(f"read_latency must be >= 1 cycle, got {read_latency}")
        self._memory = memory if callable(memory) else (lambda: memory)
        self.bus_bytes = bus_bytes
        self.read_latency = read_latency
        self.reads = 0
        self.writes = 0
        self.clear()

    def clear(self):
        """Forget every outstanding transfer (the RTL was reset)."""
        self.fault = None          # first out-of-image access, as a message
        self._pending = deque()    # [due cycle, addr, beats left]
        self._writes = deque()     # [addr, beats left] per accepted write request
        self._cycle = 0

    def _check(self, mem, addr, nbytes, what) -> bool:
        if addr + nbytes <= len(mem):
            return True
        if self.fault is None:
            self.fault = (f"DRAM {what} of {nbytes} bytes at 0x{addr:x} is outside the "
                          f"{len(mem)}-byte DRAM image")
        return False

    def process(self, rd, wr):
        """An async process serving read port ``rd`` and write port ``wr`` (either may be None)."""
        nb = self.bus_bytes

        async def serve(ctx):
            sampled = []
            if rd is not None:
                sampled += [rd.req.valid, rd.req.payload.as_value(), rd.data.ready]
                ctx.set(rd.req.ready, 1)
            if wr is not None:
                sampled += [wr.req.valid, wr.req.payload.as_value(), wr.data.valid,
                            wr.data.payload]
                ctx.set(wr.req.ready, 1)
            showing = False
            w_ready = (True, False)     # (req.ready, data.ready) driven this cycle
            async for _, _, *vals in ctx.tick().sample(*sampled):
                self._cycle += 1
                mem = self._memory()
                if rd is not None:
                    rq_valid, rq, d_ready = vals[:3]
                    vals = vals[3:]
                    pend = self._pending
                    if showing and d_ready and pend:
                        self.reads += 1
                        head = pend[0]
                        head[1] += nb
                        head[2] -= 1
                        if head[2] == 0:
                            pend.popleft()
                    if rq_valid:
                        addr, beats = rq & 0xFFFFFFFF, rq >> 32
                        if self._check(mem, addr, beats * nb, "read"):
                            pend.append([self._cycle + self.read_latency, addr, beats])
                    now = bool(pend) and pend[0][0] <= self._cycle + 1
                    if now:
                        a = pend[0][1]
                        ctx.set(rd.data.payload, int.from_bytes(mem[a:a + nb].tobytes(), "little"))
                    if now != showing:
                        ctx.set(rd.data.valid, now)
                        showing = now
                if wr is not None:
                    wq_valid, wq, d_valid, d_payload = vals
                    writes = self._writes
                    if w_ready[1] and d_valid:
                        self.writes += 1
                        head = writes[0]
                        if head[0] is not None:
                            a = head[0]
                            mem[a:a + nb] = np.frombuffer(d_payload.to_bytes(nb, "little"),
                                                          np.uint8)
                            head[0] += nb
                        head[1] -= 1
                        if head[1] == 0:
                            writes.popleft()
                    if w_ready[0] and wq_valid:
                        addr, beats = wq & 0xFFFFFFFF, wq >> 32
                        ok = self._check(mem, addr, beats * nb, "write")
                        writes.append([addr if ok else None, beats])   # bad: beats dropped
                    now = (len(writes) <= WRITE_AHEAD, bool(writes))
                    if now != w_ready:
                        ctx.set(wr.req.ready, now[0])
                        ctx.set(wr.data.ready, now[1])
                        w_ready = now

        return serve


#: A run without done after this many cycles raises a DeviceFault (TIMEOUT).
DEFAULT_MAX_CYCLES = 20_000_000
#: A run in which nothing moves for this many cycles is reported as a deadlock.
DEFAULT_STALL_CYCLES = 100_000
#: Cycles between two polls of the irq line by the simulated host.
_POLL = 32


class PysimDevice(Device):
    """The VTA RTL simulated by Amaranth's Python simulator.

    The simulator is built on the first run and kept, so SRAM contents persist
    across runs like on hardware. Options are plain keyword arguments (strings
    are accepted, for ``vtakit exec -O key=value``).

    Parameters
    ----------
    config : VTAConfig, preset name or JSON path
    dram : DRAM, optional
    token_depth, cmd_depth : int
        Dependency-token and command queue depths of the simulated hardware.
    read_latency : int
        Cycles from a DRAM read request to its first data beat (>= 1).
    vcd : str or Path, optional
        Write a VCD waveform of the whole simulation to this file (written when
        the device is closed).
    max_cycles : int
        A run without done after this many cycles raises :class:`DeviceFault` (TIMEOUT).
    stall_cycles : int
        A run in which nothing observable moves (DRAM beats, instruction and
        micro-op counters, queue and token levels) for this many cycles raises
        :class:`DeviceFault` (DEADLOCK), naming where each module stands.
        (A single reset GEMM longer than this would be misreported; raise it.)
    progress : bool
        Show a tqdm bar of simulated cycles on stderr during long runs (on a terminal).
    compute : callable, optional
        ``compute(config)`` returns the compute module (tests substitute stand-ins).
    """

    name = "pysim"
    keeps_sram = True      # one model / simulation / board for every run

    def __init__(self, config, *, dram: DRAM | None = None, token_depth=None, cmd_depth=None,
                 read_latency=1, vcd=None, max_cycles=DEFAULT_MAX_CYCLES,
                 stall_cycles=DEFAULT_STALL_CYCLES, progress=True, compute=None):
        from ..hw.spec import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH
        super().__init__(load_config(config), dram=dram)
        check_int_options(self.name, token_depth=token_depth, cmd_depth=cmd_depth,
                          read_latency=read_latency, max_cycles=max_cycles,
                          stall_cycles=stall_cycles)
        self.token_depth = int(token_depth if token_depth is not None else DEFAULT_TOKEN_DEPTH)
        self.cmd_depth = int(cmd_depth if cmd_depth is not None else DEFAULT_CMD_DEPTH)
        self.read_latency = int(read_latency)
        self.max_cycles = int(max_cycles)
        self.stall_cycles = int(stall_cycles)
        if self.read_latency < 1:
            raise DeviceError(f"pysim: read_latency={read_latency}; it must be >= 1 cycle")
        if self.max_cycles < 1 or self.stall_cycles < 1:
            raise DeviceError(f"pysim: max_cycles={max_cycles}, stall_cycles={stall_cycles}; "
                              "both must be >= 1")
        if self.token_depth < 1 or self.cmd_depth < 2:
            raise DeviceError(f"pysim: token_depth={self.token_depth} must be >= 1 and "
                              f"cmd_depth={self.cmd_depth} >= 2")
        self.vcd = vcd
        self.progress = bool(progress)
        self._compute = compute
        self._sim = None
        self._vcd_ctx = None
        self._job = None

    # ------------------------------------------------------------------ simulator
    def _build(self):
        from amaranth.sim import Simulator

        from ..hw.top import VTA
        compute = self._compute(self.config) if self._compute else None
        self.top = top = VTA(self.config, token_depth=self.token_depth,
                             cmd_depth=self.cmd_depth, compute=compute)
        self.dram_model = DramPortModel(lambda: self.dram.data, self.config.bus_bytes,
                                        read_latency=self.read_latency)
        sim = Simulator(top)
        sim.add_clock(1e-8)
        sim.add_process(self.dram_model.process(top.dram_rd, top.dram_wr))
        sim.add_testbench(self._host, background=True)
        if self.vcd:
            self._vcd_ctx = sim.write_vcd(str(self.vcd))
            self._vcd_ctx.__enter__()
        self._sim = sim

    async def _host(self, ctx):
        """The simulated host driver: serves one run request at a time."""
        from ..hw.spec import Reg
        csr = self.top.csr

        async def write(reg, value):
            ctx.set(csr.addr, int(reg))
            ctx.set(csr.w_data, value)
            ctx.set(csr.w_en, 1)
            await ctx.tick()
            ctx.set(csr.w_en, 0)

        def read(reg):
            ctx.set(csr.addr, int(reg))
            return ctx.get(csr.r_data)

        while True:
            job = self._job
            if job is None or "regs" in job:
                await ctx.tick()
                continue
            if "call" in job:
                job["regs"] = job["call"](ctx)
                continue
            self.dram_model.clear()
            await write(Reg.INSN_COUNT, job["count"])
            await write(Reg.INSN_ADDR, job["addr"])
            await write(Reg.CTRL, 1)
            waited = still = 0
            last = None
            while not ctx.get(self.top.irq) and waited < self.max_cycles:
                await ctx.tick().repeat(_POLL)
                waited += _POLL
                if job["bar"] is not None:
                    job["bar"].update(_POLL)
                now = self._progress(ctx)
                still = still + _POLL if now == last else 0
                last = now
                if still >= self.stall_cycles or self.dram_model.fault:
                    break
            job["fault"] = self.dram_model.fault
            job["timeout"] = not ctx.get(self.top.irq)
            job["stalled"] = still >= self.stall_cycles
            job["regs"] = {reg: read(reg) for reg in Reg}

    def _progress(self, ctx) -> tuple:
        """Everything that moves while a program makes progress."""
        t = self.top
        return (self.dram_model.reads, self.dram_model.writes, ctx.get(t.load.count),
                ctx.get(t.store.count), ctx.get(t.compute.gemm_count),
                ctx.get(t.compute.alu_count), ctx.get(t.compute.cmd.ready),
                *(ctx.get(q.level) for q in t.commands.values()),
                *(ctx.get(q.level) for q in t.tokens.values()))

    # ------------------------------------------------------------------ running
    def run(self, insn_addr: int, insn_count: int) -> RunResult:
        from ..hw.spec import Reg
        self.check_stream(insn_addr, insn_count)
        if self._sim is None:
            self._build()
        bar = progress_bar(desc="pysim run", unit="cycle", unit_scale=True, delay=2.0,
                           enable=self.progress)
        self._job = job = {"addr": int(insn_addr), "count": int(insn_count), "bar": bar}
        try:
            with bar:
                while "regs" not in job:
                    self._sim.advance()
        except BaseException:
            # An interrupt leaves the simulation mid-cycle: start afresh next time
            # (the SRAM contents are lost, as after a power cycle).
            self.close()
            self._sim = None
            raise
        finally:
            self._job = None
        regs = job["regs"]
        where = f"pysim ({self.config.name})"
        stats = {"gemm_counter": regs[Reg.GEMM_COUNT], "alu_counter": regs[Reg.ALU_COUNT],
                 "load_insn_count": regs[Reg.LOAD_COUNT],
                 "store_insn_count": regs[Reg.STORE_COUNT]}
        if job["fault"] or job["timeout"]:
            # The design may be mid-transfer or busy and would ignore the next start.
            self.close()
            self._sim = None
        if job["fault"]:
            raise DeviceFault(f"{where}: {job['fault']}", ErrorCode.DRAM_IMAGE)
        if job["timeout"]:
            counters = ", ".join(f"{k}={v}" for k, v in stats.items())
            job["state"] = self.rtl_state(regs, self.token_depth)
            if job["stalled"]:
                raise DeviceFault(f"{where}: deadlock: no progress for {self.stall_cycles} "
                                  f"cycles before FINISH running {insn_count} instructions at "
                                  f"0x{insn_addr:x} ({counters}; {job['state']})",
                                  ErrorCode.DEADLOCK)
            raise DeviceFault(f"{where}: no FINISH after {self.max_cycles} cycles running "
                              f"{insn_count} instructions at 0x{insn_addr:x} ({counters}; "
                              f"{job['state']}); the program deadlocks or needs a larger "
                              "max_cycles", ErrorCode.TIMEOUT)
        if regs[Reg.CTRL] & 4:
            raise self.rtl_fault(
                where, regs[Reg.ERROR_CODE], regs[Reg.ERROR_MODULE], regs[Reg.ERROR_INSN],
                insn_addr, insn_count)
        return RunResult(cycles=regs[Reg.CYCLES], stats=stats)

    def _call(self, fn):
        """Run ``fn(ctx)`` in the host testbench (between runs) and return its result."""
        if self._sim is None:
            self._build()
        self._job = job = {"call": fn}
        try:
            while "regs" not in job:
                self._sim.advance()
        finally:
            self._job = None
        return job["regs"]

    def _cells(self, name, start, count):
        """The (memory, index) of elements ``start .. start+count-1`` of SRAM ``name``.
        With ``COMPUTE_OVERLAP`` the out SRAM is two banks (``out0``, ``out1``, by the
        index's top bit); ``out`` still names the whole of it."""
        srams = self.top.srams
        banks = [srams[b] for b in ("out0", "out1")] if name == "out" and "out0" in srams else None
        if banks is None and name not in srams:
            raise DeviceError(f"pysim: no SRAM {name!r}; SRAMs are "
                              f"{', '.join(['out'] * ('out0' in srams) + list(srams))}")
        mem = banks[0] if banks else srams[name]
        depth = mem.depth * (2 if banks else 1)
        if start < 0 or count < 0 or start + count > depth:
            raise DeviceError(f"pysim: elements {start}..{start + count - 1} of SRAM {name!r} "
                              f"are outside its {depth} rows (0..{depth - 1})")
        if banks is None:
            return [(mem, i) for i in range(start, start + count)]
        half = mem.depth
        return [(banks[i // half], i % half) for i in range(start, start + count)]

    def read_sram(self, name: str, start: int = 0, count: int = 1) -> list[int]:
        """Elements ``start .. start+count-1`` of SRAM ``name`` (``inp``, ``wgt``, ``out``)."""
        if self._sim is None:
            self._build()
        cells = self._cells(name, start, count)
        return self._call(lambda ctx: [ctx.get(mem.data[i]) for mem, i in cells])

    def write_sram(self, name: str, start: int, values) -> None:
        """Overwrite SRAM ``name`` from element ``start`` (for tests and debugging)."""
        if self._sim is None:
            self._build()
        values = list(values)
        cells = self._cells(name, start, len(values))

        def poke(ctx):
            for (mem, i), v in zip(cells, values):
                ctx.set(mem.data[i], int(v))
        self._call(poke)

    def close(self) -> None:
        if self._vcd_ctx is not None:
            self._vcd_ctx.__exit__(None, None, None)
            self._vcd_ctx = None
