"""Sphinx extension: the VTA instruction set rendered from :mod:`vtakit.hw.isa` at build time.

``{vtakit-isa} CONFIG`` (a preset name or a ``vta_config.json`` path relative to the
page) writes, for that config, every instruction kind's field table (bit range, width,
signedness: what :class:`vtakit.hw.isa.Format` computes by VTA's packing rule) with a
WaveDrom bit-field diagram, then the ALU opcode table (:data:`vtakit.hw.isa.ALU_OPS`).
Nothing is retyped: change the config and the page changes (``tests/test_docs.py``).
"""

from __future__ import annotations

from pathlib import Path

from docutils.parsers.rst import Directive, directives

from vtakit_md import escape, heading, literal, parse, table

KINDS = (("mem", "LOAD and STORE"), ("gemm", "GEMM"), ("alu", "ALU"), ("finish", "FINISH"),
         ("uop", "Micro-op"))


def _load(spec: str, docdir: Path):
    from vtakit.hw.config import load_config
    path = docdir / spec
    return load_config(str(path) if spec.endswith(".json") and path.exists() else spec)


def field_rows(fmt) -> list[list[str]]:
    return [[literal(f.name), f"{f.offset + f.width - 1}:{f.offset}", str(f.width),
             "signed" if f.signed else "unsigned"] for f in fmt.fields]


def wavedrom_reg(fmt) -> dict:
    """A WaveDrom ``reg`` diagram of a format: its fields LSB first, gaps unnamed."""
    reg, pos = [], 0
    for f in fmt.fields:
        if f.offset > pos:
            reg.append({"bits": f.offset - pos})
        field = {"name": f.name, "bits": f.width, "type": 2 if f.name == "opcode" else 4}
        if f.width <= 3 and f.name != "opcode":
            field["rotate"] = -90       # a flag's name does not fit across one bit
        reg.append(field)
        pos = f.offset + f.width
    if pos < fmt.bits:
        reg.append({"bits": fmt.bits - pos})
    lanes = max(1, fmt.bits // 32)
    return {"reg": reg, "config": {"lanes": lanes, "hspace": 900, "vspace": 110,
                                   "fontsize": 11}}


def alu_rows(config) -> list[list[str]]:
    from vtakit.hw.isa import ALU_OPS
    rows = []
    for e in ALU_OPS:
        operands = []
        if e.tensor:
            operands.append("tensor" + (f" + immediate: {e.imm_meaning()}"
                                        if e.tensor_imm else ""))
        if e.imm:
            operands.append(f"immediate in {e.imm_range[0]}..{e.imm_range[1]}")
        legal = "yes" if e.base else (
            f"with {literal(e.extension)}: " + ("yes" if config.has_extension(e.extension)
                                               else "no (illegal opcode)"))
        rows.append([str(int(e.code)), literal(e.name), escape(", ".join(operands)),
                     "base" if e.base else f"extension {literal(e.extension)}", legal])
    return rows


def isa_lines(config) -> list[str]:
    from vtakit.hw.isa import isa_for
    from vtakit.hw.spec import INSN_BITS
    isa = isa_for(config)
    out = [f"Rendered for config {literal(config.name)} at build time from "
           f"{{func}}`vtakit.hw.isa.isa_for`; instructions are {INSN_BITS} bits, "
           f"micro-ops {isa.uop.bits}.", ""]
    for attr, title in KINDS:
        fmt = getattr(isa, attr)
        out += heading(f"{title} ({fmt.name})", 2)
        out += [f"```{{vtakit-isa-reg}} {config.name}-{attr}", f":kind: {attr}", "```", ""]
        out += table(["field", "bits", "width", "kind"], field_rows(fmt))
    out += heading("ALU opcodes", 2)
    out += ["From `vtakit.hw.isa.ALU_OPS`, the one table the RTL decoder, both models, "
            "the kernel builder and the fuzzer read.", ""]
    out += table(["code", "name", "operands", "defined by", f"legal on {literal(config.name)}"],
                 alu_rows(config))
    return out


class IsaDirective(Directive):
    required_arguments = 1
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        docdir = Path(env.doc2path(env.docname)).parent
        config = _load(self.arguments[0], docdir)
        env.temp_data["vtakit_isa_config"] = config
        return parse(self, isa_lines(config))


class IsaRegDirective(Directive):
    """A WaveDrom bit-field diagram of one format of the config of the enclosing ISA page."""
    required_arguments = 1
    option_spec = {"kind": directives.unchanged_required}

    def run(self):
        from sphinxcontrib.yowasp_wavedrom import wavedrom_diagram
        from vtakit.hw.isa import isa_for
        env = self.state.document.settings.env
        config = env.temp_data["vtakit_isa_config"]
        fmt = getattr(isa_for(config), self.options["kind"])
        name = self.arguments[0].replace("+", "_")
        return [wavedrom_diagram(self.block_text, name=name, src=wavedrom_reg(fmt),
                                 loc=f"{env.docname}:{self.lineno}")]


def enum_comments(enum_cls) -> dict:
    """``{member name: its trailing # comment}`` of an enum class, read from its source
    (the comments are the register map's documentation; nothing is retyped)."""
    import inspect
    import io
    import tokenize
    lines, _ = inspect.getsourcelines(enum_cls)
    comments, last = {}, None
    for tok in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
        if tok.type == tokenize.NAME and tok.start[1] == 4 and tok.line.strip().split("=")[0].strip() == tok.string:
            last = tok.string
        elif tok.type == tokenize.COMMENT and last and tok.start[0] == _row(lines, last):
            comments[last] = tok.string.lstrip("# ").strip()
    return comments


def _row(lines, name) -> int:
    for k, line in enumerate(lines, 1):
        if line.strip().startswith(f"{name} =") or line.strip().startswith(f"{name}="):
            return k
    return -1


def register_lines() -> list[str]:
    from vtakit.hw.spec import Reg
    notes = enum_comments(Reg)
    return table(["offset", "name", "meaning"],
                 [[f"`0x{int(r):02X}`", literal(r.name), escape(notes.get(r.name, ""))]
                  for r in Reg])


def error_code_lines() -> list[str]:
    from vtakit.hw.spec import ErrorCode
    notes = enum_comments(ErrorCode)
    return table(["code", "name", "meaning"],
                 [[str(int(c)), literal(c.name), escape(notes.get(c.name, ""))]
                  for c in ErrorCode])


def preset_lines() -> list[str]:
    from vtakit.hw.config import PRESETS, VTAConfig
    configs = [VTAConfig.preset(p) for p in PRESETS]
    # every key any preset sets, in file order; "-": absent from that preset (its default)
    keys = list(dict.fromkeys(k for c in configs for k in c.to_dict()))
    rows = [[literal(k)] + [literal(c.to_dict()[k]) if k in c.to_dict() else "-"
                            for c in configs] for k in keys]
    derived = ("bus_width", "macs_per_cycle", "uop_depth", "inp_depth", "wgt_depth",
               "acc_depth", "out_depth")
    rows += [[f"*{escape(k)}*"] + [literal(c.derived()[k]) for c in configs] for k in derived]
    return table(["key"] + [literal(p) for p in PRESETS], rows) + [
        "Names: " + ", ".join(f"{literal(p)} = {literal(c.name)}"
                              for p, c in zip(PRESETS, configs)) + ".", ""]


def frontend_lines(which: str) -> list[str]:
    """The operators a frontend converts, from its ``SUPPORTED_OPS``."""
    if which == "tflite":
        from vtakit.compiler.frontend.tflite import SUPPORTED_OPS
        return [", ".join(literal(op) for op in SUPPORTED_OPS) + ".", ""]
    from vtakit.compiler.frontend.onnx import OPSET_RANGE, SUPPORTED_OPS
    return [f"Opsets {OPSET_RANGE[0]}-{OPSET_RANGE[1]}: "
            + ", ".join(literal(op) for op in SUPPORTED_OPS) + ".", ""]


class FrontendDirective(Directive):
    required_arguments = 1

    def run(self):
        return parse(self, frontend_lines(self.arguments[0]))


def _simple(fn):
    class _Directive(Directive):
        def run(self):
            return parse(self, fn())
    return _Directive


def setup(app):
    app.add_directive("vtakit-isa", IsaDirective)
    app.add_directive("vtakit-isa-reg", IsaRegDirective)
    app.add_directive("vtakit-registers", _simple(register_lines))
    app.add_directive("vtakit-error-codes", _simple(error_code_lines))
    app.add_directive("vtakit-presets", _simple(preset_lines))
    app.add_directive("vtakit-frontend-ops", FrontendDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
