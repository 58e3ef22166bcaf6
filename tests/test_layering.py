"""The package's layering: no import cycle (function-local imports and `importlib` calls
counted), a network that imports only Keras, and no module reaching another's private names
(STYLE.md, "Who may import whom")."""

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


#: the imports the network makes of what sits above it, each inside one function, called only
#: where that function is: (module, function) -> what it may import there
NETWORK_CALLS_UP = {
    ("bahdanau_tf.models.base", "translate"): {"bahdanau_tf.translator"},  # deprecated, goes in 0.4
}


def _imported_by_call(node):
    """The module a call ``importlib.import_module("name")`` or ``__import__("name")`` names."""
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
    if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
        return node.args[0].value
    return None


def _imports(tree, modules, skip=()):
    """(imported package module, imported names, alias) of every import statement and every
    `importlib` call naming a module, at any depth; not inside the functions named in ``skip``."""
    skipped = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in skip
               for n in ast.walk(f)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Call) and _imported_by_call(node) in modules:
            yield _imported_by_call(node), [], None
        elif isinstance(node, ast.Import):
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


def _graph(modules, skip=None):
    """{module: the package modules it imports}; ``skip``: {(module, function)} left out."""
    graph = {name: set() for name in modules}
    for name, tree in modules.items():
        functions = {function for module, function in (skip or ()) if module == name}
        for target, _, _ in _imports(tree, modules, functions):
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
    for lower in ("bahdanau_tf.model_directory", "bahdanau_tf.translator"):
        assert not {n for n in _reached(graph, lower) if n.startswith("bahdanau_tf.models")}, lower
    assert "bahdanau_tf.training" not in graph["bahdanau_tf.data"]


def test_the_network_imports_neither_the_task_nor_the_export():
    """The network (`bahdanau_tf.models`) reaches neither the Translator, the signatures nor
    the SavedModel export, directly or through any module it imports (function-local imports
    and importlib calls counted): the task is handed the model, not the reverse. The one
    exception is the deprecated ``model.translate`` alias (`NETWORK_CALLS_UP`), which no
    import of the translator's reaches back."""
    graph = _graph(_modules(), skip=NETWORK_CALLS_UP)
    graph.pop("bahdanau_tf")
    task = {"bahdanau_tf.translator", "bahdanau_tf.signatures", "bahdanau_tf.serving"}
    for network in (name for name in graph if name.startswith("bahdanau_tf.models")):
        upward = _reached(graph, network) & task
        assert not upward, f"{network} reaches {sorted(upward)}"
    # what the exception imports never reaches the network, so no circle can close through it
    for targets in NETWORK_CALLS_UP.values():
        for target in targets:
            assert not {n for n in _reached(graph, target) if n.startswith("bahdanau_tf.models")}, target


def _top_level_imports(tree):
    """The names of the modules imported outside every function and class body."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_the_network_imports_only_keras_at_import_time():
    """What importing `bahdanau_tf.models` runs imports Keras, NumPy and the standard library,
    and of the package only the network, the presets, the shipped models' list and the special
    ids: never TensorFlow, tensorflow-text, the model directory, the tokenizers nor the
    alignment wing (tests/test_backends.py runs it where TensorFlow cannot be imported)."""
    modules = _modules()
    allowed = {"bahdanau_tf.presets", "bahdanau_tf.pretrained", "bahdanau_tf.special_tokens"}
    todo, seen, foreign = ["bahdanau_tf.models"], set(), set()
    while todo:
        name = todo.pop()
        seen.add(name)
        for imported in _top_level_imports(modules[name]):
            if imported.split(".")[0] != "bahdanau_tf":
                foreign.add(imported.split(".")[0])
                continue
            while imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported not in seen and imported != "bahdanau_tf":
                todo.append(imported)
    outside = {name for name in seen if not name.startswith("bahdanau_tf.models")} - allowed
    assert not outside, f"the network imports {sorted(outside)} at import time"
    assert foreign <= {"keras", "numpy", "__future__", "contextlib", "contextvars", "dataclasses",
                       "functools", "hashlib", "json", "logging", "os", "sys", "types", "typing",
                       "warnings", "zlib"}, sorted(foreign)


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
