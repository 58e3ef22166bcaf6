"""Runs many lines of one command in one Python process: TensorFlow is imported once, not once a line.

    python tests/commands_in_one_process.py ROWS.json RESULTS.json

``ROWS.json`` is a list of ``[command, arguments, stdin]`` (``command`` a module of
`bahdanau_tf.cli`, ``stdin`` text); ``RESULTS.json`` gets one ``{"code", "stdout", "stderr"}``
per row, in order. Each row runs its command's console-script entry point (``run``, the
function ``bahdanau-<command>`` calls) with its own ``sys.argv``, standard input, and standard
output and error captured at the file-descriptor level (TensorFlow's C++ lines included). Its
exit code is that of the `SystemExit` ending the run (0 when it returns); an exception that
escapes is printed as Python prints it when a process dies of it (a traceback) and gives code 1.
Between rows the flags are unparsed. The rows of one file should be of one command: two
commands may define a flag of the same name differently (helpers.run_commands runs one process
per command).

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


def _run_row(command, arguments, stdin):
    from absl import flags

    module = importlib.import_module(f"bahdanau_tf.cli.{command}")
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
