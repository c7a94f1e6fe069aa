"""Placeholder; replaced by the real parser."""


def parse(text):
    raise NotImplementedError


def parse_expr(text):
    raise NotImplementedError
