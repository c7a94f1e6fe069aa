"""Race-free VTA programs from a list of actions: the program builder of the fuzzer.

A fuzzed program is a list of :class:`Action` s (a LOAD, a micro-op load, a
GEMM, an ALU, a STORE, an illegal instruction, or a token pattern) without any
dependency flags. :class:`ProgramBuilder` turns such a list into an instruction
stream that is legal and race free by construction:

* it tracks, per SRAM entry, the last writer and the readers of every memory two
  modules share (INP and WGT: load writes, compute reads; OUT: compute writes,
  store reads), and before an access that another module's access must precede
  it inserts the dependency tokens that order them (a push flag on the producer's
  latest instruction, or a NOP that pushes, and pops on the consumer, draining
  older tokens with NOPs; load and store are ordered through a compute NOP);
* a pop always takes a token pushed earlier in the stream, and no queue ever
  holds more than ``token_depth`` tokens in stream order, so the stream cannot
  deadlock whatever the timing;
* FINISH is ordered after every load and store, so the final DRAM and the
  per-module counters do not depend on timing.

Stores write a DRAM region no load reads, so DRAM never carries a race. Any
sub-list of a program's actions builds another legal program (the shrinker
relies on it).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

from ..hw.config import VTAConfig
from ..hw.isa import REQ_RUN, DEP_QUEUES, AluOp, MemType, Opcode, insns_to_bytes, isa_for
from ..runtime.image import DramImage

__all__ = ["Action", "FuzzProgram", "ProgramBuilder", "MODULES", "QUEUES", "ROUTE",
           "INPUT_BYTES", "UOP_BYTES", "OUTPUT_BYTES"]

#: The modules that execute instructions, in the order of a vector clock.
MODULES = ("load", "compute", "store")
_M = {m: i for i, m in enumerate(MODULES)}

#: Token queue -> {"producer", "consumer", "push" flag, "pop" flag}, from the ISA table.
QUEUES: dict = {}
for _module, _flags in DEP_QUEUES.items():
    for _flag, _queue in _flags.items():
        if _queue is not None:
            _role = ("producer", "push") if _flag.startswith("push") else ("consumer", "pop")
            QUEUES.setdefault(_queue, {}).update({_role[0]: str(_module), _role[1]: _flag})
#: (producer module, consumer module) -> the queue between them.
ROUTE = {(q["producer"], q["consumer"]): name for name, q in QUEUES.items()}

# A NOP of each module: a LOAD/STORE with x_size 0, dispatched to that module.
_NOP = {"load": (Opcode.LOAD, MemType.INP), "compute": (Opcode.LOAD, MemType.UOP),
        "store": (Opcode.STORE, MemType.OUT)}

#: DRAM layout of a fuzzed program: page 0 unused, then the input area (LOAD sources,
#: random bytes), the micro-op area, the output area (STORE targets, zero), then the
#: instructions.
PAGE = 4096
INPUT_BYTES = 64 * 1024
UOP_BYTES = 16 * 1024
OUTPUT_BYTES = 32 * 1024
INPUT_START = PAGE
UOP_START = INPUT_START + INPUT_BYTES
OUTPUT_START = UOP_START + UOP_BYTES
INSN_START = OUTPUT_START + OUTPUT_BYTES


@dataclass
class Action:
    """One step of a fuzzed program, without dependency flags.

    Attributes
    ----------
    kind : str
        ``load``, ``uop``, ``gemm``, ``alu``, ``store``, ``illegal`` (one instruction
        built to fault), ``fill`` (NOPs of ``fields["queue"]``'s producer pushing until
        the queue holds ``token_depth`` tokens) or ``chain`` (a chain of NOPs through
        the modules ``fields["modules"]``, each ordered after the previous one).
    module : str
        The module executing it (``fetch`` for an illegal opcode).
    opcode : int
    fields : dict
        Instruction fields (no dependency flags except deliberately illegal ones).
    word : int, optional
        A raw instruction word (an illegal opcode).
    uops : ndarray, optional
        The micro-op words a ``uop`` action loads.
    source : Action, optional
        GEMM/ALU: the ``uop`` action that loaded its micro-ops; the builder loads them
        again if a sub-program lost or overwrote them.
    label : str
        What it covers, for the coverage summary.
    """

    kind: str
    module: str
    opcode: int = 0
    fields: dict = field(default_factory=dict)
    word: int | None = None
    uops: np.ndarray | None = None
    label: str = ""
    source: "Action | None" = None


def _vmax(a, b):
    return [max(x, y) for x, y in zip(a, b)]


class ProgramBuilder:
    """Emit a list of actions as a legal, race-free instruction stream.

    Parameters
    ----------
    config : VTAConfig
    token_depth : int
        Capacity of each dependency-token queue of the device it will run on.

    Attributes
    ----------
    stats : Counter
        Coverage counters of the built stream (labels, NOPs, pushes, pops, ...).
    touched : dict
        SRAM name -> boolean array of the entries the stream accesses.
    """

    def __init__(self, config: VTAConfig, token_depth: int):
        self.config = c = config
        self.isa = isa_for(config)
        self.depth = int(token_depth)
        self.insns: list = []          # [opcode, fields] or raw int words
        self.module: list = []         # module of each instruction
        self.done: list = []           # vector clock once it completed: counts per module
        self.hops: list = []           # longest token chain ending at it
        self.count = dict.fromkeys(MODULES, 0)
        self.last = dict.fromkeys(MODULES)
        self.tokens = {q: deque() for q in QUEUES}   # pusher indices of outstanding tokens
        self.occ = {q: [] for q in QUEUES}           # outstanding tokens after each insn
        self.stats: Counter = Counter()
        self.max_tokens = dict.fromkeys(QUEUES, 0)
        # Last writer (count in its module) and latest reader of each shared SRAM entry.
        self.writer = {"inp": np.zeros(c.inp_depth, np.int64),
                       "wgt": np.zeros(c.wgt_depth, np.int64),
                       "out": np.zeros(c.out_depth, np.int64)}
        self.reader = {k: np.zeros_like(v) for k, v in self.writer.items()}
        self.uop = np.zeros(c.uop_depth, np.uint32)
        self.kernels: dict = {}        # GEMM/ALU instruction index -> its micro-op words
        self.touched = {"inp": np.zeros(c.inp_depth, bool), "wgt": np.zeros(c.wgt_depth, bool),
                        "acc": np.zeros(c.acc_depth, bool), "out": np.zeros(c.out_depth, bool),
                        "uop": np.zeros(c.uop_depth, bool)}

    # ------------------------------------------------------------ emission

    def _start(self, module: str, pops) -> list:
        last = self.last[module]
        vec = list(self.done[last]) if last is not None else [0, 0, 0]
        for q in pops:
            vec = _vmax(vec, self.done[self.tokens[q][0]])
        return vec

    def _emit(self, module: str, opcode, fields: dict, pops=(), pushes=()) -> int:
        fields = dict(fields)
        start = self._start(module, pops)
        hops = self.hops[self.last[module]] if self.last[module] is not None else 0
        for q in pops:
            pusher = self.tokens[q].popleft()
            hops = max(hops, self.hops[pusher] + 1)
            fields[QUEUES[q]["pop"]] = 1
            self.stats[f"pop {q}"] += 1
        for q in pushes:
            fields[QUEUES[q]["push"]] = 1
        idx = len(self.insns)
        self.insns.append([opcode, fields])
        self.module.append(module)
        self.count[module] += 1
        start[_M[module]] = self.count[module]
        self.done.append(start)
        self.hops.append(hops)
        self.last[module] = idx
        for q in pushes:
            self.tokens[q].append(idx)
            self.stats[f"push {q}"] += 1
        for q in QUEUES:
            n = len(self.tokens[q])
            self.occ[q].append(n)
            self.max_tokens[q] = max(self.max_tokens[q], n)
        return idx

    def _nop(self, module: str, pops=(), pushes=()) -> int:
        opcode, mem = _NOP[module]
        self.stats["nop"] += 1
        return self._emit(module, opcode, {"memory_type": mem}, pops, pushes)

    def _provide(self, q: str, need: int) -> None:
        """Make sure ``q`` holds a token pushed once its producer had completed ``need``
        instructions."""
        producer, consumer = QUEUES[q]["producer"], QUEUES[q]["consumer"]
        p = _M[producer]
        tokens = self.tokens[q]
        if tokens and self.done[tokens[-1]][p] >= need:
            return
        last = self.last[producer]
        flag = QUEUES[q]["push"]
        if (isinstance(self.insns[last], list) and not self.insns[last][1].get(flag)
                and max(self.occ[q][last:]) < self.depth):
            # A push flag on the producer's latest instruction: it holds the token from
            # its position in the stream on.
            self.insns[last][1][flag] = 1
            for i in range(last, len(self.occ[q])):
                self.occ[q][i] += 1
            self.max_tokens[q] = max(self.max_tokens[q], max(self.occ[q][last:]))
            tokens.append(last)
            self.stats[f"push {q}"] += 1
            return
        if len(tokens) >= self.depth:      # full: the consumer takes one first
            self._nop(consumer, [q])
        self._nop(producer, pushes=[q])

    def _ensure(self, module: str, need) -> list:
        """Emit what orders the next instruction of ``module`` after ``need`` (completed
        instructions per module); returns the queues that instruction must pop."""
        need = list(need)
        pops: list = []
        while True:
            start = self._start(module, pops)
            missing = [m for m in range(3) if need[m] > start[m]]
            if not missing:
                return pops
            direct = [m for m in missing if (MODULES[m], module) in ROUTE]
            if not direct:    # load <-> store: through a compute NOP
                sub = [0, 0, 0]
                sub[missing[0]] = need[missing[0]]
                nop = self._nop("compute", self._ensure("compute", sub))
                need = _vmax(need, self.done[nop])
                continue
            m = direct[0]
            q = ROUTE[(MODULES[m], module)]
            if q in pops:
                pops.remove(q)
            self._provide(q, need[m])
            while self.done[self.tokens[q][0]][m] < need[m]:
                self._nop(module, [q])     # drain older tokens
            pops.append(q)

    # ------------------------------------------------------------ actions

    def _loop_indices(self, f: dict, field_name: str, f_out: str, f_in: str) -> np.ndarray:
        uops = self.isa.decode_uops(self.uop[f["uop_bgn"]:f["uop_end"]])[field_name]
        p = np.arange(f["iter_out"])[:, None, None]
        q = np.arange(f["iter_in"])[None, :, None]
        return (uops[None, None, :] + p * f.get(f_out, 0) + q * f.get(f_in, 0)).ravel()

    def _accesses(self, a: Action):
        """(reads, writes): lists of (shared SRAM, index array) of an action, and the
        entries of every SRAM it touches (for coverage)."""
        f, c = a.fields, self.config
        reads, writes, touch = [], [], []
        if a.kind in ("load", "store") and f.get("x_size", 0):
            if a.kind == "load":
                mt = MemType(f["memory_type"])
                total = ((f["x_pad_0"] + f["x_size"] + f["x_pad_1"])
                         * (f["y_pad_0"] + f["y_size"] + f["y_pad_1"]))
                name = mt.name.lower()
            else:
                total, name = f["x_size"] * f["y_size"], "out"
            idx = np.arange(f["sram_base"], f["sram_base"] + total)
            touch.append((name, idx))
            if name in ("inp", "wgt"):
                writes.append((name, idx))
            elif name == "out":
                reads.append((name, idx))
        elif a.kind == "uop":
            touch.append(("uop", np.arange(f["sram_base"], f["sram_base"] + f["x_size"])))
        elif a.kind in ("gemm", "alu") and f["uop_end"] > f["uop_bgn"] and \
                f["iter_out"] and f["iter_in"]:
            touch.append(("uop", np.arange(f["uop_bgn"], f["uop_end"])))
            dst = self._loop_indices(f, "dst_idx", "dst_factor_out", "dst_factor_in")
            touch.append(("acc", dst))
            if a.kind == "gemm" and f.get("reset_reg"):
                return reads, writes, touch
            writes.append(("out", dst))
            touch.append(("out", dst))
            if a.kind == "gemm":
                for name, fld, fo, fi in (("inp", "src_idx", "src_factor_out", "src_factor_in"),
                                          ("wgt", "wgt_idx", "wgt_factor_out", "wgt_factor_in")):
                    idx = self._loop_indices(f, fld, fo, fi)
                    reads.append((name, idx))
                    touch.append((name, idx))
            elif not f.get("use_imm"):
                touch.append(("acc", self._loop_indices(f, "src_idx", "src_factor_out",
                                                        "src_factor_in")))
            if len(np.unique(dst)) < len(dst):
                self.stats["accumulate hazard"] += 1
        return reads, writes, touch

    def _clip(self, name, idx):
        return np.minimum(idx, len(self.writer[name]) - 1)

    def add(self, a: Action) -> None:
        """Emit one action."""
        if a.kind == "fill":
            q = a.fields["queue"]
            producer = QUEUES[q]["producer"]
            while len(self.tokens[q]) < self.depth:
                self._nop(producer, pushes=[q])
            self.stats[f"filled {q}"] += 1
            return
        if a.kind == "chain":
            prev = None
            for m in a.fields["modules"]:
                need = self.done[prev] if prev is not None else [0, 0, 0]
                prev = self._nop(m, self._ensure(m, need))
            self.stats["chain"] += 1
            return
        if a.source is not None:
            # the source's whole range intact (a kernel may run a part of it)
            b = a.source.fields["sram_base"]
            if not np.array_equal(self.uop[b:b + len(a.source.uops)], a.source.uops):
                self.add(a.source)
        self.stats[a.label or a.kind] += 1
        if a.kind == "illegal":
            # Built to fault: no ordering needed, the run ends at it on every backend.
            if a.word is not None:
                self.insns.append(a.word)
                self.module.append("fetch")
                self.done.append(self.done[-1] if self.done else [0, 0, 0])
                self.hops.append(0)
                for q in QUEUES:
                    self.occ[q].append(len(self.tokens[q]))
            else:
                self._emit(a.module, a.opcode, a.fields)
            return
        reads, writes, touch = self._accesses(a)
        need = [0, 0, 0]
        for name, idx in reads:      # after the last writer of every entry read
            idx = self._clip(name, idx)
            writer = "load" if name in ("inp", "wgt") else "compute"
            need[_M[writer]] = max(need[_M[writer]], int(self.writer[name][idx].max()))
        for name, idx in writes:     # after every reader of every entry written
            idx = self._clip(name, idx)
            reader = "compute" if name in ("inp", "wgt") else "store"
            need[_M[reader]] = max(need[_M[reader]], int(self.reader[name][idx].max()))
        pops = self._ensure(a.module, need)
        idx = self._emit(a.module, a.opcode, a.fields, pops)
        if a.kind in ("gemm", "alu"):
            self.kernels[idx] = self.uop[a.fields["uop_bgn"]:a.fields["uop_end"]].copy()
        n = self.count[a.module]
        for name, idx in reads:
            idx = self._clip(name, idx)
            self.reader[name][idx] = np.maximum(self.reader[name][idx], n)
        for name, idx in writes:
            self.writer[name][self._clip(name, idx)] = n
        for name, idx in touch:
            self.touched[name][np.minimum(idx, len(self.touched[name]) - 1)] = True
        if a.kind == "uop":
            b, x = a.fields["sram_base"], a.fields["x_size"]
            self.uop[b:b + x] = a.uops

    def late_dependences(self) -> Counter:
        """The read-after-write pairs on a late micro-op's dst (the hold's cases, see
        :mod:`vtakit.hw.compute`): ``{"late dep d{k} {same|across} {reader}": count}``.

        A late micro-op (:func:`~vtakit.hw.alu.late_ops`; REQ with imm 0) writes its dst
        ``L - 1`` cycles after a base one would (L = :func:`~vtakit.hw.alu.late_stages`);
        a micro-op issued ``k`` slots after it (``k <= L + 1``) that reads that entry (as
        its dst, or as its tensor src) is one pair. Slots count micro-ops in issue order
        (``p > q > k``), plus one for each instruction boundary between consecutive
        GEMM/ALU instructions; any other compute instruction between them (a micro-op or
        ACC load, a NOP: they wait for the writes) and a push flag on the earlier one end
        the window. ``reader``: ``late`` (a late opcode), ``setup`` (REQ.M/REQ.P, src only),
        ``alu`` or ``gemm`` (base opcodes). Empty in a config without late opcodes."""
        from ..hw.alu import late_ops, late_stages
        out: Counter = Counter()
        late = {int(op) for op in late_ops(self.config)}
        if not late:
            return out
        reach = late_stages(self.config) + 1
        push = {q["push"] for q in QUEUES.values()}
        window: list = []          # (slot, dst, instruction index) of late micro-ops
        slot = 0
        for i, insn in enumerate(self.insns):
            if self.module[i] != "compute":
                continue
            words = self.kernels.get(i)
            if words is None or not len(words):
                window = []
                continue
            opcode, f = insn
            u = self.isa.decode_uops(words)
            gemm = opcode == Opcode.GEMM
            code = None if gemm else int(f.get("alu_opcode", 0))
            use_imm = bool(f.get("use_imm"))
            setup = (code == int(AluOp.REQ) and not use_imm and int(f.get("imm", 0)) != REQ_RUN)
            produces = code in late and not setup and not use_imm
            reader = ("gemm" if gemm else "setup" if setup else
                      "late" if code in late else "alu")
            reads_dst = not (setup or (gemm and f.get("reset_reg")))
            reads_src = not gemm and not use_imm
            slot += 1
            for p in range(f["iter_out"]):
                for q in range(f["iter_in"]):
                    dst = u["dst_idx"] + p * f.get("dst_factor_out", 0) + q * f.get("dst_factor_in", 0)
                    src = u["src_idx"] + p * f.get("src_factor_out", 0) + q * f.get("src_factor_in", 0)
                    for d, s_ in zip(dst.tolist(), src.tolist()):
                        window = [w for w in window if slot - w[0] <= reach]
                        for w_slot, w_dst, w_insn in window:
                            if (reads_dst and d == w_dst) or (reads_src and s_ == w_dst):
                                where = "same" if w_insn == i else "across"
                                out[f"late dep d{slot - w_slot} {where} {reader}"] += 1
                        if produces:
                            window.append((slot, d, i))
                        slot += 1
            if any(f.get(flag) for flag in push):
                window = []
        return out

    def finish(self) -> list[int]:
        """Order FINISH after every load and store, emit it; returns the words."""
        pops = self._ensure("compute", [self.count["load"], 0, self.count["store"]])
        self._emit("compute", Opcode.FINISH, {}, pops)
        self.stats["longest token chain"] = max(self.stats["longest token chain"], max(self.hops))
        for q, n in self.max_tokens.items():
            if n >= self.depth:
                self.stats[f"{q} at capacity"] += 1
        self.stats.update(self.late_dependences())
        return [w if isinstance(w, int) else self.isa.encode(w[0], **w[1]) for w in self.insns]


@dataclass
class FuzzProgram:
    """A fuzzed program: the DRAM contents below the instruction area and its actions.

    Attributes
    ----------
    config : VTAConfig
    data : ndarray
        uint8, ``INSN_START`` bytes: page 0, the input, micro-op and output areas.
    actions : list of Action
    token_depth : int
    """

    config: VTAConfig
    data: np.ndarray
    actions: list
    token_depth: int

    def build(self, actions=None):
        """The program (or the sub-program of ``actions``) as ``(DramImage, builder)``."""
        b = ProgramBuilder(self.config, self.token_depth)
        for a in self.actions if actions is None else actions:
            b.add(a)
        words = b.finish()
        code = np.frombuffer(insns_to_bytes(words), np.uint8)
        dram = np.concatenate([self.data, code])
        return DramImage(dram, INSN_START, len(words), self.config.to_dict()), b
