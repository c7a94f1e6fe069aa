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
