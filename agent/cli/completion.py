"""`agentrt completion bash|zsh|tcsh`: a shell completion script, made from the parser by shtab.

shtab turns the argparse parser into a static script, so completing costs the shell nothing and
needs no Python at each TAB (argcomplete runs the program on every TAB, which for agentrt means
importing it). Load it with `eval "$(agentrt completion bash)"` or save it where the shell looks.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "tcsh")


def args_completion(p: argparse.ArgumentParser) -> None:
    """The shell to write a script for."""
    p.add_argument("shell", choices=SHELLS, help="the shell that loads the script")


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the completion script of every command and option for `args.shell`."""
    import shtab

    from agent.cli.main import build_parser

    print(shtab.complete(build_parser(), shell=args.shell))
    return 0
