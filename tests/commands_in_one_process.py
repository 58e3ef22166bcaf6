"""Runs many lines of one command in one Python process: TensorFlow is imported once, not once a line.

    python tests/commands_in_one_process.py ROWS.json RESULTS.json

``ROWS.json`` is a list of ``[command, arguments, stdin]`` (``command`` a module of
`bahdanau_tf.cli`, ``stdin`` text); ``RESULTS.json`` gets one ``{"code", "stdout", "stderr"}``
per row, in order. Each row runs its command's console-script entry point (``run``, the
function ``bahdanau-<command>`` calls) with its own ``sys.argv``, standard input, and standard
output and error captured at the file-descriptor level (TensorFlow's C++ lines included). Its
exit code is that of the `SystemExit` ending the run (0 when it returns); an exception that
escapes is printed as Python prints it when a process dies of it (a traceback) and gives code 1.
Between rows the flags are unparsed. Rows may be of several commands: when the command changes,
every flag the last one defined is removed (two commands may define a flag of one name
differently) and the new command's module is run again (`_command_module`), so that each row
sees its own command's flags, and only those, as a fresh process would.

What only a fresh process shows (the quiet TensorFlow import, signals, the process's own exit
status) is tested with real subprocesses elsewhere (tests/test_cli_*.py); a table of refusals
needs neither, and each of its rows would otherwise pay TensorFlow's import, the largest part of
a refusal's time.
"""

import importlib
import io
import json
import os
import sys
import tempfile
import traceback


_BASELINE = []  # the names of the flags defined before any command's (absl's own)
_DEFINED = []  # the module of the command whose flags are defined now


def _command_module(command):
    """The command's module, its flags (and no other command's) defined."""
    from absl import app, flags

    name = f"bahdanau_tf.cli.{command}"
    if not _BASELINE:
        importlib.import_module("bahdanau_tf.cli")
        app.define_help_flags()  # what app.run defines once a process
        _BASELINE.extend(flags.FLAGS)
    if _DEFINED == [name]:
        return sys.modules[name]
    for flag in set(flags.FLAGS) - set(_BASELINE):
        delattr(flags.FLAGS, flag)
    _DEFINED[:] = [name]
    return importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)


def _run_row(command, arguments, stdin):
    from absl import flags

    module = _command_module(command)
    sys.argv = [module.__file__, *arguments]
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            module.run(sys.argv)
            code = 0
        except SystemExit as exit:
            code = 0 if exit.code is None else exit.code if isinstance(exit.code, int) else 1
        except BaseException:  # noqa: BLE001 - what a process dying of it would print
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            flags.FLAGS.unparse_flags()
        out.seek(0)
        err.seek(0)
        return {"code": code, "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace")}


def main(rows_path, results_path):
    with open(rows_path, encoding="utf-8") as handle:
        rows = json.load(handle)
    results = [_run_row(command, arguments, stdin) for command, arguments, stdin in rows]
    with open(results_path, "w", encoding="utf-8") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main(*sys.argv[1:])
