"""Placeholder; replaced by the real printer."""


def type_text(t):
    return object.__repr__(t)


def astext(e, **kw):
    return object.__repr__(e)
