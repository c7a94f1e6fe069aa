"""bench/synth.py's table of earlier runs (``--from-json``): one row per report, and the
revision of each row when the files come from more than one revision."""

import json
from bench_util import load_script
from test_latency import _recorded


def _bench():
    return load_script("synth")


def _write(path, revision, report):
    path.write_text(json.dumps({"revision": revision, "machine": "x86_64, 2 CPUs",
                                "reports": [report.to_dict()]}))
    return path


def test_from_json_names_each_rows_revision(tmp_path, capsys):
    rec = _recorded()
    a = _write(tmp_path / "a.json", "abc1234", rec)
    b = _write(tmp_path / "b.json", "def5678", rec)
    _bench().main(["--from-json", str(a), str(b), "--markdown"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[0].rstrip(" |").endswith("revision")
    assert [r.split("|")[-2].strip() for r in rows[2:]] == ["abc1234", "def5678"]
    assert all(f"{rec.fmax_mhz:.1f}" in r for r in rows[2:])
    # one revision: no column (the header line above the table says it)
    _bench().main(["--from-json", str(a), str(a)])
    out = capsys.readouterr().out
    assert "revision abc1234" in out and "revision " not in out.splitlines()[2]
