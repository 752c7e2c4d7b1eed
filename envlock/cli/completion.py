"""``envlock completion bash|zsh|fish``: shell completion generated from the parser.

Why generated: the completion is read from the same argparse parser the command runs, so
a new option or subcommand completes without anyone editing a script. Install with, e.g.,
``envlock completion bash > ~/.local/share/bash-completion/completions/envlock``.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from typing import Any, List, Tuple

from envlock.errors import ExitCode

__all__ = ["register", "run", "command_tree", "render", "SHELLS"]

SHELLS = ("bash", "zsh", "fish")


@dataclass(frozen=True)
class Option:
    flags: Tuple[str, ...]
    help: str
    takes_value: bool
    choices: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    options: Tuple[Option, ...]
    #: sub-subcommands (``matrix gpu``), by name
    children: Tuple["Command", ...] = ()


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh, fish)",
                       description="Print a completion script for the shell, generated from "
                                   "envlock's own parser. bash: envlock completion bash > "
                                   "~/.local/share/bash-completion/completions/envlock; zsh: "
                                   "envlock completion zsh > ~/.zfunc/_envlock (with ~/.zfunc "
                                   "in fpath); fish: envlock completion fish > "
                                   "~/.config/fish/completions/envlock.fish",
                       epilog="Exit codes: 0 printed, 2 unknown shell.")
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(run=run)


def _gpu_ids() -> Tuple[str, ...]:
    """The matrix's GPU ids (``h100-sxm``, ``rtx-4090``): ``--gpu`` takes them, and unlike
    the marketing names they hold no spaces a shell would split."""
    from envlock.matrix import get_matrix

    return tuple(sorted(get_matrix().gpus))


def _advisory_ids() -> Tuple[str, ...]:
    from envlock.matrix import get_matrix

    return tuple(sorted(get_matrix().advisories))


#: values the matrix knows, for options and positionals argparse gives no choices
_DYNAMIC_OPTIONS = {"--gpu": _gpu_ids}
_DYNAMIC_POSITIONALS = {("explain", "id"): _advisory_ids}


def _options(parser: argparse.ArgumentParser) -> Tuple[Option, ...]:
    out = []
    for a in parser._actions:  # argparse has no public walk; _actions is stable since 2.7
        if not a.option_strings or a.help == argparse.SUPPRESS:
            continue
        choices = tuple(str(c) for c in (a.choices or ()))
        dynamic = next((_DYNAMIC_OPTIONS[f] for f in a.option_strings if f in _DYNAMIC_OPTIONS),
                       None)
        if not choices and dynamic is not None:
            choices = dynamic()
        out.append(Option(tuple(a.option_strings), (a.help or "").split(";")[0].strip(),
                          a.nargs != 0, choices))
    return tuple(out)


def _positional_choices(parser: argparse.ArgumentParser, name: str = "") -> Tuple[str, ...]:
    for a in parser._actions:
        if not a.option_strings and a.choices and not isinstance(a, argparse._SubParsersAction):
            return tuple(str(c) for c in a.choices)
        if not a.option_strings and (name, a.dest) in _DYNAMIC_POSITIONALS:
            return _DYNAMIC_POSITIONALS[(name, a.dest)]()
    return ()


def _tree(parser: argparse.ArgumentParser, name: str, help_: str) -> Command:
    children: List[Command] = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help or "" for c in a._choices_actions}
            for sub_name, sub_parser in a.choices.items():
                children.append(_tree(sub_parser, sub_name, helps.get(sub_name, "")))
    for choice in _positional_choices(parser, name):
        children.append(Command(choice, "", ()))
    return Command(name, help_, _options(parser), tuple(children))


def command_tree() -> Command:
    from envlock.cli import build_parser

    return _tree(build_parser(), "envlock", "")


def _words(cmd: Command) -> List[str]:
    return [c.name for c in cmd.children] + [f for o in cmd.options for f in o.flags]


def _bash(root: Command) -> str:
    paths: List[str] = []  # every command path: "", "verify", "matrix gpu", ...
    words: List[str] = []  # what completes at each path
    values: List[str] = []  # "path|--flag" -> its choices (or files)

    def walk(cmd: Command, path: str) -> None:
        paths.append(path)
        words.append(f"        {shlex.quote(path)}) words={shlex.quote(' '.join(_words(cmd)))} ;;")
        for o in cmd.options:
            if not o.takes_value:
                continue
            for f in o.flags:
                key = shlex.quote(f"{path}|{f}")
                if o.choices:
                    values.append(f"        {key}) COMPREPLY=($(compgen -W "
                                  f"{shlex.quote(' '.join(o.choices))} -- \"$cur\")); return ;;")
                else:
                    values.append(f"        {key}) COMPREPLY=($(compgen -f -- \"$cur\")); "
                                  f"return ;;")
        for c in cmd.children:
            walk(c, f"{path} {c.name}".strip())

    walk(root, "")
    known = "\n".join(f"            {shlex.quote(p)}) path=\"$next\" ;;" for p in paths[1:])
    return (
        "# bash completion for envlock (generated by `envlock completion bash`)\n"
        "_envlock() {\n"
        "    local cur prev path=\"\" next i w words\n"
        "    cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
        "    prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
        "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "        w=\"${COMP_WORDS[i]}\"\n"
        "        [[ \"$w\" == -* ]] && continue\n"
        "        next=\"${path:+$path }$w\"\n"
        "        case \"$next\" in\n" + known + "\n"
        "        esac\n"
        "    done\n"
        "    case \"$path|$prev\" in\n" + "\n".join(values) + "\n"
        "    esac\n"
        "    case \"$path\" in\n" + "\n".join(words) + "\n"
        "    esac\n"
        "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
        "}\n"
        "complete -o default -F _envlock envlock\n")


def _zsh(root: Command) -> str:
    def esc(text: str) -> str:
        return text.replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(
            ":", "\\:")

    def specs(cmd: Command) -> List[str]:
        out = []
        for o in cmd.options:
            value = ""
            if o.takes_value:
                value = f":value:({' '.join(o.choices)})" if o.choices else ":value:_files"
            for f in o.flags:
                out.append(f"'{f}[{esc(o.help)}]{value}'")
        return out

    funcs: List[str] = []

    def walk(cmd: Command, fname: str) -> None:
        lines = [f"{fname}() {{"]
        if cmd.children:
            items = " ".join(f"'{c.name}:{esc(c.help)}'" for c in cmd.children)
            lines.append("    local -a cmds; cmds=(" + items + ")")
            lines.append("    _arguments -C " + " ".join(specs(cmd)) +
                         " '1: :->cmd' '*:: :->args'")
            lines.append("    case $state in")
            lines.append("        cmd) _describe command cmds ;;")
            lines.append("        args) case $words[1] in")
            for c in cmd.children:
                lines.append(f"            {c.name}) {fname}_{c.name.replace('-', '_')} ;;")
            lines.append("        esac ;;")
            lines.append("    esac")
        else:
            lines.append("    _arguments " + " ".join(specs(cmd)) + " '*:file:_files'")
        lines.append("}")
        funcs.append("\n".join(lines))
        for c in cmd.children:
            walk(c, f"{fname}_{c.name.replace('-', '_')}")

    walk(root, "_envlock")
    return ("#compdef envlock\n"
            "# zsh completion for envlock (generated by `envlock completion zsh`)\n"
            + "\n\n".join(funcs) + "\n\n_envlock \"$@\"\n")


def _fish(root: Command) -> str:
    lines = ["# fish completion for envlock (generated by `envlock completion fish`)",
             "complete -c envlock -f"]

    def q(text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def walk(cmd: Command, path: List[str]) -> None:
        if path:
            cond = " ".join(f"__fish_seen_subcommand_from {p};" for p in path[-1:])
            cond = f"-n {q(cond.rstrip(';'))}"
        else:
            cond = "-n '__fish_use_subcommand'"
        for c in cmd.children:
            lines.append(f"complete -c envlock {cond} -a {c.name} -d {q(c.help)}")
        for o in cmd.options:
            parts = []
            for f in o.flags:
                parts.append(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}")
            extra = ""
            if o.takes_value:
                extra = f" -x -a {q(' '.join(o.choices))}" if o.choices else " -r -F"
            lines.append(f"complete -c envlock {cond} {' '.join(parts)} -d {q(o.help)}{extra}")
        for c in cmd.children:
            walk(c, path + [c.name])

    walk(root, [])
    return "\n".join(lines) + "\n"


def render(shell: str) -> str:
    root = command_tree()
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](root)


def run(args: argparse.Namespace, out: Any) -> int:
    out.stdout.write(render(args.shell))
    return ExitCode.OK
