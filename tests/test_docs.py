"""The manual (docs/) and the README: what is generated from the code follows the code.

* the README is one screen, keeps the set-up commands `.ci/run` parses, and its Python
  example runs as written;
* the ISA reference page is rendered from ``vtakit.hw.isa`` at build time: a Sphinx
  build of a page with another config shows that config's field widths;
* every ``vtakit`` subcommand and every name of ``vtakit.__all__`` gets a generated
  page; the benchmark pages render the recorded bench JSON with its revision and
  machine, and ``docs/benchmarks/record.py`` records a script's JSON.

The full manual build and its doctests run in ``.ci/run`` (``sphinx-build -W`` and
``sphinx-build -b doctest``), not here.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

sys.path.insert(0, str(DOCS / "_ext"))
import vtakit_api  # noqa: E402
import vtakit_bench  # noqa: E402
import vtakit_cli  # noqa: E402
import vtakit_isa  # noqa: E402


# ------------------------------------------------------------------------- README

def _command_after(marker: str) -> str:
    """The line after ``marker`` that starts with ``pip ``, as .ci/run's awk finds it."""
    lines = README.read_text().splitlines()
    start = lines.index(marker)
    return next(line for line in lines[start + 1:] if line.startswith("pip "))


def test_readme_is_one_screen_with_the_setup_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert _command_after("<!-- main-command -->") == "pip install . && vtakit demo"
    assert _command_after("<!-- test-command -->") == 'pip install -e ".[test]" && pytest'


def test_readme_links_exist():
    text = README.read_text()
    links = re.findall(r"\]\((docs/[^)#]+)\)", text)
    assert links, "the README links into the manual"
    for link in links:
        assert (ROOT / link).exists(), link


def test_readme_example_runs(tmp_path, monkeypatch):
    """The README's Python block, run as written (from a folder with the test data)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    code = blocks[0]
    assert len([line for line in code.splitlines() if line.strip()]) <= 12
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    monkeypatch.chdir(tmp_path)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("RTL equal: True"), result.stdout
    assert (tmp_path / "kws.vtax").stat().st_size > 0


# ------------------------------------------------------------------------ the ISA

def _build(src: Path, out: Path, extensions: list[str]) -> str:
    """Build ``src/index.md`` to pseudo-XML with only ``extensions``; the page's text."""
    (src / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        f"extensions = ['myst_parser', 'sphinxcontrib.yowasp_wavedrom', *{extensions!r}]\n"
        "source_suffix = {'.md': 'markdown'}\n")
    from sphinx.cmd.build import build_main
    status = build_main(["-q", "-W", "-E", "-b", "pseudoxml", str(src), str(out)])
    assert status == 0
    return (out / "index.pseudoxml").read_text()


def _cells(page: str) -> list[str]:
    return [line.strip() for line in page.splitlines()
            if line.strip() and not line.strip().startswith("<")]


def _row(cells: list[str], field: str) -> tuple[str, str]:
    """``(bits, width)`` of the table row of ``field`` (the first such row)."""
    k = cells.index(field)
    return cells[k + 1], cells[k + 2]


def test_isa_page_follows_the_config(tmp_path):
    """The ISA page's field widths come from the config: change a buffer size and the
    generated page changes, as vtakit.hw.isa says it must."""
    from vtakit.hw import VTAConfig, isa_for
    pages = {}
    for log_acc in (14, 13):
        config = VTAConfig.preset("tiny").replace(log_acc_buff_size=log_acc)
        src = tmp_path / f"src{log_acc}"
        src.mkdir()
        (src / "mine.json").write_text(json.dumps(config.to_dict()))
        (src / "index.md").write_text("# ISA\n\n```{vtakit-isa} mine.json\n```\n")
        page = _build(src, tmp_path / f"out{log_acc}", ["vtakit_isa"])
        cells = _cells(page)
        isa = isa_for(config)
        for fmt, field in ((isa.uop, "dst_idx"), (isa.gemm, "dst_factor_out"),
                           (isa.alu, "src_factor_in")):
            f = fmt[field]
            assert (f"{f.offset + f.width - 1}:{f.offset}", str(f.width)) in [
                _row(cells[k:], field) for k, c in enumerate(cells) if c == field]
        assert config.name in page
        pages[log_acc] = cells
    assert _row(pages[14], "dst_idx") == ("8:0", "9")       # 512 accumulator rows
    assert _row(pages[13], "dst_idx") == ("7:0", "8")       # 256
    assert pages[14] != pages[13]


def test_isa_page_lists_the_alu_table():
    from vtakit.hw import VTAConfig
    from vtakit.hw.isa import ALU_OPS
    base = "\n".join(vtakit_isa.isa_lines(VTAConfig.preset("tiny")))
    ext = "\n".join(vtakit_isa.isa_lines(VTAConfig.preset("tiny").replace(
        extensions=("requant",))))
    for e in ALU_OPS:
        assert f"| {int(e.code)} | `{e.name}` |" in base
    # legal exactly where the config enables the opcode's extension
    for e in ALU_OPS:
        if not e.base:
            for config, text in (("base", base), ("requant", ext)):
                on = config == e.extension
                assert (f"with `{e.extension}`: " + ("yes" if on else "no (illegal opcode)")
                        in text), (e.name, config)


def test_register_table_is_the_code_s():
    from vtakit.hw.spec import Reg
    lines = vtakit_isa.register_lines()
    assert len(lines) == len(Reg) + 3
    assert "| `0x0C` | `INSN_ADDR` | rw: byte address of the first instruction" in "\n".join(lines)


# ------------------------------------------------------------------ CLI and API

def test_every_subcommand_has_a_page(tmp_path):
    import pkgutil
    from vtakit.cli import commands
    # one module per subcommand; `board-sim` lives in board_sim.py
    modules = {m.name.replace("_", "-") for m in pkgutil.iter_modules(commands.__path__)}
    subs = vtakit_cli.subcommands()
    assert set(subs) == modules

    class App:
        srcdir = tmp_path
    (tmp_path / "reference" / "cli").mkdir(parents=True)
    (tmp_path / "reference" / "cli" / "gone.md").write_text("# old\n")
    vtakit_cli.write_pages(App)
    assert {p.stem for p in (tmp_path / "reference" / "cli").glob("*.md")} == modules
    for name, (parser, help_text) in subs.items():
        text = "\n".join(vtakit_cli.parser_lines(parser, f"vtakit {name}", help_text, 1))
        for action in parser._actions:
            if action.help == "show this help message and exit":
                continue
            for flag in action.option_strings:
                assert f"`{flag}" in text, (name, flag)


def test_every_public_name_has_a_page(tmp_path):
    import importlib
    import vtakit

    class App:
        srcdir = tmp_path
    vtakit_api.write_pages(App)
    pages = {p.stem for p in (tmp_path / "reference" / "api").glob("*.md")}
    assert pages == set(vtakit.__all__)
    for name in vtakit.__all__:
        kind, path = vtakit_api.target(name)
        module, _, attr = path.rpartition(".")
        assert getattr(importlib.import_module(module), attr) is getattr(vtakit, name)


# ------------------------------------------------------------------- benchmarks

def test_recorded_benchmarks_render():
    records = sorted((DOCS / "benchmarks" / "data").glob("*.json"))
    assert records, "at least one recorded benchmark"
    for path in records:
        record = json.loads(path.read_text())
        assert re.fullmatch(r"[0-9a-f]{7,40}", record["revision"])
        assert record["machine"]["cores"] >= 1 and record["machine"]["cpu"]
        text = "\n".join(vtakit_bench.page_lines(record))
        assert record["revision"] in text and record["script"] in text
        assert "|---|" in text


def test_record_writes_revision_machine_and_result(tmp_path, monkeypatch):
    sys.path.insert(0, str(DOCS / "benchmarks"))
    import record
    script = tmp_path / "fake_bench.py"
    script.write_text(
        '"""A fake benchmark."""\nimport json, sys\n'
        'json.dump([{"model": "m", "cycles": 1234}], open(sys.argv[sys.argv.index("--json") + 1], "w"))\n')
    monkeypatch.setattr(record, "DATA", tmp_path / "data")
    assert record.main(["fake", str(script), "--x", "1"]) == 0
    out = json.loads((tmp_path / "data" / "fake.json").read_text())
    assert out["result"] == [{"model": "m", "cycles": 1234}]
    assert out["args"] == ["--x", "1"] and out["script"] == str(script)
    assert re.fullmatch(r"[0-9a-f]{12}", out["revision"])
    text = "\n".join(vtakit_bench.page_lines(out))
    assert "| m | 1,234 |" in text


@pytest.mark.parametrize("page", ["howto", "explanation", "reference", "tutorials"])
def test_pages_start_with_a_title(page):
    for path in (DOCS / page).glob("*.md"):
        assert path.read_text().startswith("# "), path
