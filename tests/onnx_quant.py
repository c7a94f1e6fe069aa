"""onnxruntime's static quantization, as the tests call it."""


def feeds_reader(feeds):
    """A ``CalibrationDataReader`` for ``onnxruntime.quantization.quantize_static`` that
    hands out ``feeds`` (an iterable of ``{input name: array}``) once each."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    return Reader()


def quantize(src, dst, feeds, *, act="uint8", per_channel=False, fmt="QDQ", **options):
    """onnxruntime's ``quantize_static`` of the float model ``src`` into ``dst``: int8
    weights, ``act`` ("uint8" or "int8") activations, format ``fmt`` ("QDQ" or
    "QOperator"), calibrated on ``feeds``; other keywords go to ``quantize_static``."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    quantize_static(str(src), str(dst), feeds_reader(feeds),
                    quant_format=getattr(QuantFormat, fmt), per_channel=per_channel,
                    activation_type=QuantType.QUInt8 if act == "uint8" else QuantType.QInt8,
                    weight_type=QuantType.QInt8, **options)
    return dst
