"""What every ONNX converter shares: the import's values (:class:`_Val`, quantized ones
with :class:`_QInfo`), the converter registry (:func:`_converter`: one decorator line per
ONNX op type, default domain or com.microsoft), the error type and the attribute,
quantization-parameter and window helpers."""

from __future__ import annotations

import numpy as np

from ....hw.errors import VtakitError
from ...ir import Call, Tuple, get_op

__all__ = ["OnnxImportError", "OPSET_RANGE", "CONVERT_TO"]


#: the default-domain opsets this importer accepts: those from 11 on are imported as they
#: are, older ones are first converted to :data:`CONVERT_TO` by ``onnx.version_converter``
OPSET_RANGE = (1, 22)


#: the opset models older than 11 are converted to
CONVERT_TO = 13


class OnnxImportError(VtakitError, ValueError):
    """A model that cannot be imported (unsupported op, malformed graph); one line."""


def _call(name, *args, **attrs):
    return Call(get_op(name), args, attrs)


def _np_dtype(elem_type):
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name


class _QInfo:
    """Quantization of a DequantizeLinear output: value = (src - zp) * scale.

    ``src`` is an int8-domain :class:`_Val` (or a constant), ``zp`` is in the same
    domain, ``scale``/``zp`` are scalars or 1-D along ``axis``.
    """

    __slots__ = ("src", "scale", "zp", "axis", "raw")

    def __init__(self, src, scale, zp, axis, raw="int8"):
        self.src, self.scale, self.zp, self.axis, self.raw = src, scale, zp, axis, raw

    @property
    def raw_zp(self):
        """The zero point as written in the model (uint8 tensors: in 0..255)."""
        return int(self.zp) + 128 if self.raw == "uint8" else int(self.zp)

    def same_params(self, scale, zp, axis):
        if self.scale.shape != np.shape(scale) or self.zp.shape != np.shape(zp):
            return False
        if self.scale.ndim and self.axis != axis:
            return False
        return bool(np.array_equal(self.scale, scale) and np.array_equal(self.zp, zp))


class _Val:
    """An ONNX tensor during import: an IR expr, a compile-time constant or a quantized value.

    ``u8``: a runtime uint8 tensor held in the IR as int8 (value - 128).
    """

    __slots__ = ("expr", "const", "shape", "dtype", "q", "u8")

    def __init__(self, expr=None, const=None, shape=None, dtype=None, q=None, u8=False):
        if const is not None:
            const = np.asarray(const)
            shape, dtype = const.shape, const.dtype.name
        self.expr, self.const, self.shape, self.dtype, self.q, self.u8 = (
            expr, const, None if shape is None else tuple(int(d) for d in shape), dtype, q, u8)


_CONVERTERS = {}


_MS_CONVERTERS = {}   # com.microsoft ops (onnxruntime's operator-format quantized ops)


def _converter(*names, domain=""):
    table = _MS_CONVERTERS if domain == "com.microsoft" else _CONVERTERS
    def deco(fn):
        for n in names:
            table[n] = fn
        return fn
    return deco


def _where(node):
    return f"{node.op_type} node {node.name or '?'!r}"


def _attrs(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _to_int8_domain(arr):
    arr = np.asarray(arr)
    if arr.dtype == np.uint8:
        return (arr.astype(np.int16) - 128).astype(np.int8)
    return arr


def _zp_domain(zp, dtype):
    zp = np.asarray(zp if zp is not None else 0).astype(np.int32)
    return zp - 128 if dtype == "uint8" else zp


def _dequant_np(q, scale, zp, axis):
    q = _to_int8_domain(q).astype(np.float32)
    scale, zp = np.asarray(scale, np.float32), np.asarray(zp, np.float32)
    if scale.size == 1:  # a 1-element scale is per tensor (onnxruntime's reading)
        scale, zp = scale.reshape(()), zp.reshape(-1)[0] if zp.size else zp
    if scale.ndim == 1:
        shape = [1] * q.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return ((q - zp) * scale).astype(np.float32)


def _scale_attr(s):
    s = np.asarray(s, np.float32)
    return float(s) if s.ndim == 0 else s


def _zp_attr(z):
    z = np.asarray(z, np.int32)
    return int(z) if z.ndim == 0 else z


def _int_attr_list(a, key, default):
    v = a.get(key, default)
    return [int(x) for x in v]


def _spatial(ctx, node, a, in_shape, kernel, what):
    """strides, (top, left, bottom, right) padding and dilations of a 2-D window op."""
    if len(kernel) != 2:
        raise OnnxImportError(f"{_where(node)}: only 1-D and 2-D {what} is supported, got a "
                              f"{len(kernel)}-D kernel")
    strides = _int_attr_list(a, "strides", [1, 1])
    dil = _int_attr_list(a, "dilations", [1, 1])
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        p = _int_attr_list(a, "pads", [0, 0, 0, 0])
        pads = (p[0], p[1], p[2], p[3])
    elif auto == "VALID":
        pads = (0, 0, 0, 0)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(2):
            size = in_shape[2 + i]
            out = -(-size // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - size)
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto == "SAME_UPPER" else (big, small)
            begin.append(b)
            end.append(e)
        pads = (begin[0], begin[1], end[0], end[1])
    else:
        raise OnnxImportError(f"{_where(node)}: unknown auto_pad {auto!r}")
    return tuple(strides), pads, tuple(dil)


def _dilate_kernel(w, dil):
    """A constant kernel with zeros between its taps: the same conv without dilation."""
    o, i, kh, kw = w.shape
    out = np.zeros((o, i, (kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1), w.dtype)
    out[:, :, ::dil[0], ::dil[1]] = w
    return out


def _qparams(node, ins, zp_index, axis_default=1):
    """(scale float32, zero point int32 in the int8 domain, axis, onnx dtype)."""
    scale = ins[1].const if ins[1] is not None else None
    if scale is None:
        raise OnnxImportError(f"{_where(node)}: the scale must be a constant")
    zp = ins[zp_index] if len(ins) > zp_index else None
    if zp is not None and zp.const is None:
        raise OnnxImportError(f"{_where(node)}: the zero point must be a constant")
    dtype = zp.dtype if zp is not None else "uint8"
    return np.asarray(scale, np.float32), zp.const if zp is not None else None, dtype


def _check_qdtype(node, dtype):
    if dtype not in ("int8", "uint8", "int32"):
        raise OnnxImportError(f"{_where(node)}: {dtype} quantization is not supported "
                              f"(int8 and uint8 activations, int32 biases)")


def _requant_passthrough(ctx, x, int8_expr):
    """A quantized value computed on int8 data with ``x``'s parameters unchanged."""
    q = x.q
    return _Val(q=_QInfo(_Val(int8_expr, dtype="int8"), q.scale, q.zp, q.axis, q.raw),
                dtype="float32")


def _scalar_bool(ctx, v):
    e = ctx.value_expr(v)
    t = ctx.type_of(v)
    if t.shape != ():
        e = _call("reshape", e, newshape=())
    if t.dtype != "bool":
        e = _call("cast", e, dtype="bool")
    return e


def _graph_result(ctx, outs):
    exprs = [ctx.value_expr(o) for o in outs]
    return exprs[0] if len(exprs) == 1 else Tuple(exprs)

