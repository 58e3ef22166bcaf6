"""The package's layering: no import cycle (function-local imports counted) and no module
reaching another's private names (STYLE.md, "Who may import whom")."""

import ast
import pathlib

import bahdanau_tf

PACKAGE = pathlib.Path(bahdanau_tf.__file__).parent


def _modules():
    """{module name: parsed source} of every module of the package."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = ast.parse(path.read_text(encoding="utf-8"))
    return modules


def _imports(tree, modules):
    """(imported package module, imported names, alias) of every import statement, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name, [], alias.asname or alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in modules:
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if target in modules:  # from bahdanau_tf import data
                    yield target, [], alias.asname or alias.name
                else:
                    yield node.module, [alias.name], None


def _graph(modules):
    graph = {name: set() for name in modules}
    for name, tree in modules.items():
        for target, _, _ in _imports(tree, modules):
            # a package's own __init__ re-exports its submodules: that is not a dependency back
            if target != name and not (name.startswith(target + ".") and target == "bahdanau_tf"):
                graph[name].add(target)
    return graph


def _cycles(graph):
    cycles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def _reached(graph, module):
    """Every package module ``module`` imports, directly or through the modules it imports."""
    reached, todo = set(), [module]
    while todo:
        for target in graph[todo.pop()] - reached - {"bahdanau_tf"}:
            reached.add(target)
            todo.append(target)
    return reached


def test_no_import_cycle_even_through_function_local_imports():
    graph = _graph(_modules())
    graph.pop("bahdanau_tf")  # the package's namespace imports everything, nothing imports it back
    for deps in graph.values():
        deps.discard("bahdanau_tf")
    assert _cycles(graph) == []
    # the layers the README lists: the network above the on-disk format and the task
    assert "bahdanau_tf.models" not in graph["bahdanau_tf.model_directory"]
    assert "bahdanau_tf.models" not in graph["bahdanau_tf.translator"]
    assert "bahdanau_tf.training" not in graph["bahdanau_tf.data"]


def test_the_network_imports_neither_the_task_nor_the_export():
    """The models (and their base) reach neither the Translator, the signatures nor the
    SavedModel export, directly or through any module they import (function-local imports
    counted): the task is handed the model, not the reverse."""
    graph = _graph(_modules())
    graph.pop("bahdanau_tf")
    for network in ("bahdanau_tf.models", "bahdanau_tf.translation_model"):
        upward = _reached(graph, network) & {"bahdanau_tf.translator", "bahdanau_tf.signatures", "bahdanau_tf.serving"}
        assert not upward, f"{network} reaches {sorted(upward)}"


def test_the_translator_reaches_neither_the_signatures_nor_the_export():
    """The Translator is handed to the signatures and the export, never the reverse: the string
    graph it runs around the search is `bahdanau_tf.text_graph`'s, the chunk plan
    `bahdanau_tf.decoding.chunks`'."""
    graph = _graph(_modules())
    graph.pop("bahdanau_tf")
    upward = _reached(graph, "bahdanau_tf.translator") & {"bahdanau_tf.signatures", "bahdanau_tf.serving"}
    assert not upward, f"bahdanau_tf.translator reaches {sorted(upward)}"


def test_no_module_reaches_another_modules_private_names():
    modules = _modules()
    reached = []
    for name, tree in modules.items():
        aliases = {}
        for target, names, alias in _imports(tree, modules):
            reached += [f"{name}: from {target} import {n}" for n in names
                        if n.startswith("_") and not n.startswith("__")]
            if alias:
                aliases[alias] = target
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and aliases[node.value.id] != name
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                reached.append(f"{name}: {aliases[node.value.id]}.{node.attr}")
    assert reached == []


def test_every_tf_function_of_the_package_is_traced_without_autograph():
    """The package's graphs are TF ops and explicit tf.while_loops: AutoGraph's conversion
    would only cost time and write generated modules to the temp dir (BUILD.md)."""
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):  # a bare @tf.function decorator
                assert not any(isinstance(d, ast.Attribute) and d.attr == "function"
                               for d in node.decorator_list), f"{name}: line {node.lineno}"
            if not isinstance(node, ast.Call):
                continue
            function = node.func
            if isinstance(function, ast.Attribute) and function.attr == "function" and \
                    isinstance(function.value, ast.Name) and function.value.id == "tf":
                keywords = {k.arg: k.value for k in node.keywords}
                assert "autograph" in keywords and isinstance(keywords["autograph"], ast.Constant) \
                    and keywords["autograph"].value is False, f"{name}: line {node.lineno}"
            if isinstance(function, ast.Attribute) and function.attr in ("map", "filter", "flat_map"):
                assert node.args and isinstance(node.args[0], ast.Call) and \
                    getattr(node.args[0].func, "id", None) == "_graph_only", \
                    f"{name}: line {node.lineno}: a tf.data function without _graph_only"


def test_no_name_is_used_undefined_in_the_package_its_tests_scripts_or_benchmarks():
    """pyflakes's undefined names (a name used but never bound: a function-local import of
    the wrong module, a typo) over every Python file of the repository: each would fail only
    when its line runs."""
    from pyflakes import api, messages, reporter

    undefined = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)
    found = []

    class Collect(reporter.Reporter):
        def __init__(self):
            pass

        def flake(self, message):
            if isinstance(message, undefined):
                found.append(str(message))

        def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802 - pyflakes's name
            found.append(f"{filename}:{lineno}: {msg}")

        def unexpectedError(self, filename, msg):  # noqa: N802 - pyflakes's name
            found.append(f"{filename}: {msg}")

    root = PACKAGE.parent
    for folder in ("bahdanau_tf", "tests", "scripts", "benchmarks"):
        for path in sorted((root / folder).rglob("*.py")):
            api.checkPath(str(path), Collect())
    assert not found, "\n".join(found)
