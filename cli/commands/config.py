"""``vtakit config show NAME|FILE``: a config's keys and derived parameters as JSON."""

import json

from ...hw.config import PRESETS, load_config


def register(sub):
    p = sub.add_parser("config", help="inspect VTA configurations")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = csub.add_parser("show", help="print a config's keys and derived parameters as JSON")
    show.add_argument("config", metavar="NAME|FILE",
                      help=f"a preset ({', '.join(PRESETS)}) or a vta_config.json path")
    show.set_defaults(func=run_show)
    lst = csub.add_parser("list", help="list the shipped presets")
    lst.set_defaults(func=run_list)


def run_show(args):
    print(json.dumps(load_config(args.config).derived(), indent=2))


def run_list(args):
    for name in PRESETS:
        print(f"{name:10s} {load_config(name).model}")
