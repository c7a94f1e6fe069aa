"""``vtakit synth`` and ``vtakit build``: arguments, errors, the overflow message."""

import json
import re

import pytest

from vtakit.cli.main import main


def test_synth_lists_targets(capsys):
    with pytest.raises(SystemExit):
        main(["synth", "--help"])
    out = capsys.readouterr().out
    assert "{ecp5-85k,ice40-up5k,xilinx-7}" in out


def test_unknown_target_and_board_are_argument_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["synth", "--config", "tiny", "--target", "ecp5-12k"])
    assert e.value.code == 2 and "invalid choice: 'ecp5-12k'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["build", "--board", "icebreaker"])
    assert e.value.code == 2 and "invalid choice: 'icebreaker'" in capsys.readouterr().err


def test_build_bitstream_rejects_unknown_board():
    from vtakit.boards.build import build_bitstream
    with pytest.raises(ValueError, match=r"^unknown board 'nope'; boards are ulx3s$"):
        build_bitstream("nope")


@pytest.mark.slow
def test_synth_overflow_message_and_json(capsys, tmp_path):
    out = tmp_path / "r.json"
    assert main(["synth", "--config", "tiny", "--target", "ice40-up5k", "--no-pnr",
                 "--json", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert re.match(r"^vtakit synth: error: 1x8_i8w8a32_12_12_14_14 does not fit ice40-up5k "
                    r"\(.*\): lut \d+ > 5280 \(\+\d+, \d+% of the device\)", err[0])
    assert err[1].startswith("  no vtakit config is estimated to fit ice40-up5k")
    (report,) = json.loads(out.read_text())
    assert report["fits"] is False and report["suggestion"]


def test_synth_rejects_a_negative_dsp_budget(capsys):
    assert main(["synth", "--config", "tiny", "--target", "xilinx-7", "--dsp-budget", "-1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "vtakit synth: error: --dsp-budget -1: a number of multipliers, 0 or more")
