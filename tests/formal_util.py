"""Helpers of the formal test tier (``pytest -m formal``): run a spec with
:func:`vtakit.hw.formal.check` and assert it proves, or (mutation checks) that it
fails with a counterexample trace.

Free inputs of a design: :func:`free_stream_source` drives a stream's ``valid`` and
``payload`` from ``AnySeq`` and assumes the stream rules of ``amaranth.lib.stream``
(once valid, valid and payload hold until ready), as a well-behaved producer does.
"""

import shutil

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Signal, Value

from vtakit.hw.formal import check

#: Where mutation tests copy their counterexample traces (under pytest's tmp_path).
TRACES = "counterexamples"


def prove(spec, name, tmp_path, *, mode="prove", depth=10, **kw):
    """Run ``spec`` and assert it passes; returns the :class:`FormalResult`."""
    result = check(spec, name=name, workdir=tmp_path, mode=mode, depth=depth, **kw)
    print(result.summary())
    assert result.passed, (f"{result.summary()}\n"
                           + "\n".join(result.log.splitlines()[-30:]))
    return result


def refute(spec, name, tmp_path, *, mode="prove", depth=10, **kw):
    """Run the spec of a mutated design and assert it fails with a counterexample VCD,
    which is copied to ``tmp_path/counterexamples/<name>.vcd``; returns that path."""
    result = check(spec, name=name, workdir=tmp_path, mode=mode, depth=depth, **kw)
    print(result.summary())
    assert not result.passed, f"the mutation was not caught: {result.summary()}"
    assert result.status in ("FAIL", "UNKNOWN"), result.summary()
    assert result.trace is not None and result.trace.stat().st_size > 0, \
        f"no counterexample trace: {result.summary()}"
    saved = tmp_path / TRACES / f"{name}.vcd"
    saved.parent.mkdir(exist_ok=True)
    shutil.copyfile(result.trace, saved)
    assert b"$enddefinitions" in saved.read_bytes()
    return saved


def free_stream_source(m, stream, *, held=True):
    """Drive ``stream`` (a ``lib.stream`` interface the design consumes) from free
    variables; with ``held``, assume the producer's stream rules."""
    m.d.comb += [stream.valid.eq(AnySeq(1)),
                 stream.payload.eq(AnySeq(len(Value.cast(stream.payload))))]
    if held:
        stream_rules(m, stream, assume=True)


def stream_rules(m, stream, *, assume=False, name="stream"):
    """The handshake rules of a stream: once ``valid`` is high, ``valid`` and ``payload``
    hold until ``ready`` (asserted, or assumed of a free producer)."""
    waiting = Signal(name=f"{name}_waiting")
    payload = Value.cast(stream.payload)
    last = Signal(len(payload), name=f"{name}_last")
    m.d.sync += [waiting.eq(stream.valid & ~stream.ready), last.eq(payload)]
    prop = Assume if assume else Assert
    with m.If(waiting):
        m.d.comb += [prop(stream.valid), prop(payload == last)]
