"""Build small int8 TFLite flatbuffers in the tests (single operators, no TensorFlow).

Field slots follow TFLite's ``schema.fbs``; only what the tests need is written.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions

_TYPES = {"float32": 0, "int32": 2, "uint8": 3, "int64": 4, "int16": 7, "int8": 9}


_PREPEND = {"int8": "PrependInt8Slot", "uint8": "PrependUint8Slot", "int32": "PrependInt32Slot",
            "uint32": "PrependUint32Slot", "bool": "PrependBoolSlot",
            "float32": "PrependFloat32Slot"}


class ModelBuilder:
    """Tensors and operators of one subgraph; :meth:`build` returns the file's bytes."""

    def __init__(self):
        self.tensors = []      # (name, shape, dtype, data or None, scale, zp, axis)
        self.ops = []          # (opname, inputs, outputs, options_name, options fields)

    def tensor(self, name, shape, dtype="int8", data=None, scale=None, zero_point=None, axis=0):
        self.tensors.append((name, tuple(shape), dtype, data, scale, zero_point, axis))
        return len(self.tensors) - 1

    def const(self, name, data, scale=None, zero_point=None, axis=0):
        data = np.asarray(data)
        return self.tensor(name, data.shape, data.dtype.name, data, scale, zero_point, axis)

    def op(self, name, inputs, outputs, options=None, fields=None):
        """``options``: the options table's name (e.g. ``"Conv2DOptions"``); ``fields``:
        {slot: (kind, value)} with kind one of int8/uint8/int32/uint32/float32/bool."""
        self.ops.append((name, list(inputs), list(outputs), options, fields or {}))

    # ------------------------------------------------------------------ build

    def build(self, inputs, outputs) -> bytes:
        b = flatbuffers.Builder(1024)
        b.ForceDefaults(True)     # every given field is written, defaults included
        # buffers: 0 is the empty sentinel
        buf_offsets = [self._table(b, [])]
        buf_index = []
        for t in self.tensors:
            if t[3] is None:
                buf_index.append(0)
                continue
            raw = np.ascontiguousarray(t[3]).view(np.uint8).reshape(-1)
            vec = b.CreateNumpyVector(raw)
            buf_offsets.append(self._table(b, [(0, "offset", vec)]))
            buf_index.append(len(buf_offsets) - 1)
        tensor_offsets = []
        for (name, shape, dtype, _, scale, zp, axis), bi in zip(self.tensors, buf_index):
            name_off = b.CreateString(name)
            shape_off = b.CreateNumpyVector(np.asarray(shape, np.int32))
            fields = [(0, "offset", shape_off), (1, "int8", _TYPES[dtype]), (2, "uint32", bi),
                      (3, "offset", name_off)]
            if scale is not None:
                s = b.CreateNumpyVector(np.atleast_1d(np.asarray(scale, np.float32)))
                z = b.CreateNumpyVector(np.atleast_1d(np.asarray(
                    0 if zp is None else zp, np.int64)))
                q = self._table(b, [(2, "offset", s), (3, "offset", z), (6, "int32", axis)])
                fields.append((4, "offset", q))
            tensor_offsets.append(self._table(b, fields))
        codes = sorted({o[0] for o in self.ops})
        code_offsets = []
        for c in codes:
            v = getattr(BuiltinOperator, c)
            code_offsets.append(self._table(b, [(0, "int8", min(v, 127)), (2, "int32", 1),
                                                (3, "int32", v)]))
        op_offsets = []
        for name, ins, outs, opt_name, fields in self.ops:
            ins_off = b.CreateNumpyVector(np.asarray(ins, np.int32))
            outs_off = b.CreateNumpyVector(np.asarray(outs, np.int32))
            f = [(0, "uint32", codes.index(name)), (1, "offset", ins_off), (2, "offset", outs_off)]
            if opt_name is not None:
                opt = self._table(b, [(slot, kind, val) for slot, (kind, val) in fields.items()])
                f += [(3, "uint8", getattr(BuiltinOptions, opt_name)), (4, "offset", opt)]
            op_offsets.append(self._table(b, f))
        sg = self._table(b, [
            (0, "offset", self._vector(b, tensor_offsets)),
            (1, "offset", b.CreateNumpyVector(np.asarray(inputs, np.int32))),
            (2, "offset", b.CreateNumpyVector(np.asarray(outputs, np.int32))),
            (3, "offset", self._vector(b, op_offsets))])
        model = self._table(b, [
            (0, "uint32", 3), (1, "offset", self._vector(b, code_offsets)),
            (2, "offset", self._vector(b, [sg])), (4, "offset", self._vector(b, buf_offsets))])
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())

    @staticmethod
    def _vector(b, offsets):
        b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    @staticmethod
    def _table(b, fields):
        n = max((f[0] for f in fields), default=-1) + 1
        b.StartObject(n)
        for slot, kind, val in fields:
            if kind == "offset":
                b.PrependUOffsetTRelativeSlot(slot, val, 0)
            elif kind in _PREPEND:
                getattr(b, _PREPEND[kind])(slot, val, 0)
            else:
                raise ValueError(kind)
        return b.EndObject()


def reference_run(model_bytes, inputs):
    """Outputs of LiteRT's reference kernels (``BUILTIN_REF``)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=model_bytes,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]
