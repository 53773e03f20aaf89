"""`import privplan` and `privplan --help` load no pandas, scipy or DuckDB (issue: first
hour), and the `df.dp` accessor is there whichever of pandas and privplan comes first."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pandas", "scipy", "duckdb", "numpy", "sqlglot")


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


def test_import_privplan_and_cli_help_stay_light() -> None:
    out = _run(
        "import sys, contextlib, io\n"
        "import privplan\n"
        "from privplan.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert out == "[]"


def test_accessor_whichever_comes_first() -> None:
    for code in ("import privplan\nimport pandas as pd\n", "import pandas as pd\nimport privplan\n"):
        out = _run(code + "import importlib.resources\n"
                          "print(type(pd.DataFrame({'a': [1]}).dp).__name__, "
                          "pd.__loader__ is pd.__spec__.loader, "
                          "importlib.resources.files('pandas').joinpath('__init__.py').is_file())")
        assert out == "DPAccessor True True", code


def test_public_names_resolve() -> None:
    out = _run("import privplan as pp\n"
               "print(all(getattr(pp, n) is not None for n in pp.__all__), 'connect' in dir(pp))")
    assert out == "True True"


def test_dir_shows_the_public_names_only() -> None:
    out = _run("import privplan as pp, privplan.errors as e, inspect\n"
               "names = dir(pp)\n"
               "errors = sorted(n for n, c in vars(e).items() if inspect.isclass(c)\n"
               "                and issubclass(c, e.PrivplanError))\n"
               "print(names == sorted([*pp.__all__, '__version__']), len(set(pp.__all__)) == "
               "len(pp.__all__), set(errors) <= set(pp.__all__),\n"
               "      [n for n in names if n in ('importlib', 'sys', 'MetaPathFinder', "
               "'ModuleSpec', 'ModuleType', 'TYPE_CHECKING', 'Any', 'Loader')],\n"
               "      all(not n.startswith('_') for n in pp.__all__))")
    assert out == "True True True [] True"


def test_a_pure_dp_answer_loads_no_scipy() -> None:
    """A one-query process (the CLI, a script) answering with pure DP — its answer, intervals,
    accuracy and explanation, and the CLI's printed answer — never imports scipy (~0.25 s):
    only Gaussian tails, PLD sessions and conversions need it, and load it then (a PLD
    session after it: loaded, and it answers)."""
    out = _run(
        "import sys, contextlib, io, tempfile, os\n"
        "import duckdb\n"
        "import privplan as pp\n"
        "from privplan.cli import main\n"
        "d = tempfile.mkdtemp()\n"
        "path = os.path.join(d, 'd.duckdb')\n"
        "con = duckdb.connect(path)\n"
        "con.execute(\"CREATE TABLE t AS SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END AS g, "
        "i % 11 AS x FROM range(100) r(i)\")\n"
        "con.close()\n"
        "policy = os.path.join(d, 'p.yaml')\n"
        "open(policy, 'w').write('tables:\\n  t:\\n    privacy_unit: row\\n    columns:\\n"
        "      g: {type: str, public_values: [a, b]}\\n"
        "      x: {type: int, lower: 0, upper: 10}\\n')\n"
        "with pp.connect(path, policy=policy, budget=pp.PureDP(10)) as s:\n"
        "    r = s.sql('SELECT g, COUNT(*) AS n, AVG(x) AS m FROM t GROUP BY g', epsilon=1)\n"
        "    shown = (r.df, r.intervals, r.accuracy, str(r.explanation), r._repr_html_())\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['query', '--database', path, '--policy', policy, '--no-ledger',\n"
        "          '--total', '10', '--epsilon', '1', 'SELECT g, COUNT(*) AS n FROM t GROUP BY g'])\n"
        "pure = sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')\n"
        "with pp.connect(path, policy=policy, budget=pp.ApproxDP(10, 1e-6),\n"
        "                composition='pld') as s:\n"
        "    r = s.sql('SELECT g, COUNT(*) AS n FROM t GROUP BY g', epsilon=1, delta=1e-8)\n"
        "    r.intervals, str(r.explanation), s.spent()\n"
        "print(pure, 'scipy.optimize' in sys.modules)")
    assert out == "[] True"
