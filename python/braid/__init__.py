"""braid from Python: the CLI's commands, run in this process, returning their JSON as dicts.

    import braid
    report = braid.simulate(study="configs/studies/default.yaml", schedule="stp", tp=4)
    print(report["iteration_time_s"])

Each function takes the command's options as keywords (docs/python.md): an underscore in a
keyword is a dash in the option (global_batch=64 is --global-batch 64), a list is a comma list
(tp=[2, 4] is --tp 2,4), True/False are on/off where the option takes a value and the bare switch
where it takes none (force=True is --force), None leaves the option out. The keywords become a
command line that braid's own parser reads, in this process (the compiled module braid._braid),
so they mean exactly what the CLI's options mean and fail with the CLI's messages, raised as
braid.Error.
"""

import json
import os
import warnings
from numbers import Integral, Real

from . import _braid

__all__ = [
    "Error",
    "Warning",
    "command_line",
    "run",
    "simulate",
    "compare",
    "sweep",
    "search",
    "info",
    "to_dataframe",
]


class Error(Exception):
    """A braid command failed.

    str(error) is the CLI's one line, as `braid` prints it on stderr ("braid: ..."). exit_code is
    the CLI's exit code: 2 for bad input (an option, a file, a study that cannot run); anything
    else is an internal error, a bug in braid, and has internal set to True. stderr holds
    everything the command printed on stderr.
    """

    def __init__(self, message, exit_code, stderr):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.internal = exit_code != 2
        self.stderr = stderr


class Warning(UserWarning):  # pylint: disable=redefined-builtin
    """A line braid printed on stderr for a command that succeeded (e.g. an option it ignores)."""


def _word(value):
    """One option value as the CLI writes it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ",".join(_word(v) for v in value)
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        return repr(float(value))  # the shortest text that reads back as the same double
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"braid: cannot pass {type(value).__name__} {value!r} as an option value")


_KINDS = {}


def _option_kinds(command):
    """{option name: 'flag' | 'value' | 'values'} from the command's own CLI definition."""
    if command not in _KINDS:
        _KINDS[command] = _braid.options(command)
    return _KINDS[command]


def command_line(command, **options):
    """The argument list that the keywords give for `braid COMMAND` (what the functions run).

    An option the command does not have is passed on as it is, so that the CLI names it and
    suggests the one meant ("unknown option --tpp; did you mean --tp?").
    """
    kinds = _option_kinds(command)
    args = [command]
    for key, value in options.items():
        if value is None:
            continue
        name = key.replace("_", "-")
        kind = kinds.get(name, "value")
        if kind == "flag":
            if not isinstance(value, bool):
                raise TypeError(f"braid {command}: --{name} is a switch: give True or False")
            if value:
                args.append("--" + name)
        elif kind == "values" and isinstance(value, (list, tuple)):
            args.append("--" + name)
            args.extend(_word(v) for v in value)
        else:
            args += ["--" + name, _word(value)]
    return args


def _last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run(*args):
    """`braid ARGS...` in this process; returns what it printed on stdout.

    For the commands without a function here, or another output format:
    braid.run("schedule", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4", "--json").
    Raises braid.Error when the command fails; lines a successful command printed on stderr
    become braid.Warning warnings.
    """
    code, out, err = _braid.run([_word(a) for a in args])
    if code != 0:
        message = _last_line(err) or f"braid: exit code {code} without a message"
        raise Error(message, code, err)
    for line in err.splitlines():
        if line.strip():
            warnings.warn(line, Warning, stacklevel=3)
    return out


def _json_command(command, options):
    for own in ("json", "csv"):
        if own in options:
            raise TypeError(
                f"braid.{command} always reads the JSON output; for --{own} use braid.run"
            )
    return json.loads(run(*command_line(command, **options), "--json"))


def simulate(**options):
    """`braid simulate ... --json`: one report (dict): the iteration time, rates, MFU,
    tokens_per_s, memory, and `ranks` (one dict per pipeline rank) and `critical_path`."""
    return _json_command("simulate", options)


def compare(**options):
    """`braid compare ... --json`: {"reports": [one simulate report per schedule]}."""
    return _json_command("compare", options)


def sweep(**options):
    """`braid sweep ... --json`: the memory cap, counts (configurations, valid, oom, invalid) and
    `rows`, one dict per configuration (its sizes, schedule, and report or reason)."""
    return _json_command("sweep", options)


def search(**options):
    """`braid search ... --json` (gpus= and global_batch= are required): the setting, the
    counts of candidates, `best` (the top layouts, fastest first), why_runner_up, `levers` (what
    would make a layout fit when none does) and `invalid_rows`."""
    return _json_command("search", options)


def info(**options):
    """`braid info ... --json`: what the cost model makes of the study: parameter counts, FLOPs,
    `chunks` (per virtual stage), `units` (per-unit costs) and the layer kernels."""
    return _json_command("info", options)


# The list of dicts that to_dataframe tabulates for each kind of result, by a key only it has.
_TABLES = (("rows", "rows"), ("reports", "reports"), ("best", "best"), ("ranks", "ranks"),
           ("units", "units"))


def to_dataframe(result, table=None):
    """A pandas DataFrame of a result's main table, nested dicts flattened to dotted columns:
    sweep's rows, compare's reports, search's best, simulate's ranks, info's units; a list of
    dicts as it is. table= names another list of the result (e.g. "invalid_rows" of a search).
    Raises ImportError when pandas is not installed (Debian: python3-pandas)."""
    try:
        import pandas  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError(
            "braid.to_dataframe needs pandas (Debian: apt-get install python3-pandas); "
            "without it, braid's results are plain dicts and lists"
        ) from e
    if table is not None:
        rows = result[table]
    elif isinstance(result, list):
        rows = result
    else:
        found = [key for marker, key in _TABLES if marker in result]
        if not found:
            raise ValueError("braid.to_dataframe: no table in this result; name one with table=")
        rows = result[found[0]]
    return pandas.json_normalize(rows)
