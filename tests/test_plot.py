"""Pictures (privplan.views.plot): a result's bars are its released values with their 95% intervals;
the budget plot draws the ledger's composed and sequential totals, disjoint queries as free."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest

import privplan as pp
from privplan.cli import EXIT_USAGE, main
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.errors import PolicyError


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("plot") / "d.duckdb", rows=3_000)


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield
    plt.close("all")


def _session(db: Path, ledger: Path | None = None, total: float = 3) -> pp.Session:
    return pp.connect(db, policy=demo_policy_path(), budget=pp.PureDP(total), ledger=ledger)


def test_result_bars_are_the_values_and_their_intervals(db: Path) -> None:
    with _session(db) as s:
        res = s.sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital", epsilon=1)
    ax = res.plot()
    bars = ax.patches
    assert [b.get_height() for b in bars] == pytest.approx(res.df["n"].astype(float).tolist())
    assert [t.get_text() for t in ax.get_xticklabels()] == res.df["hospital"].tolist()
    # the error bars run from each row's low to its high end of the 95% interval
    (container,) = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    segments = container.lines[2][0].get_segments()
    ends = sorted((float(seg[0][1]), float(seg[1][1])) for seg in segments)
    shown = res.with_intervals()
    want = sorted(zip(shown["n_low"].astype(float), shown["n_high"].astype(float)))
    assert [v for pair in ends for v in pair] == pytest.approx(
        [v for pair in want for v in pair])  # (approx takes flat sequences only)
    assert ax.get_ylabel() == "n" and ax.get_xlabel() == "hospital"


def test_several_columns_and_a_result_without_keys(db: Path) -> None:
    with _session(db) as s:
        res = s.sql("SELECT department, COUNT(*) AS n, AVG(cost) AS mean_cost FROM visits "
                    "GROUP BY department", epsilon=1)
        total = s.sql("SELECT COUNT(*) AS n FROM visits", epsilon=1)
    panels = res.plot()  # one panel per column, each on its own scale
    assert len(panels) == 2 and panels.figure is panels[0].figure is panels[1].figure
    for panel, col in zip(panels, ["n", "mean_cost"]):
        assert [b.get_height() for b in panel.patches] == pytest.approx(
            res.df[col].astype(float).tolist())
        assert panel.get_ylabel() == col and panel.get_xlabel() == "department"
    one = res.plot(ax=plt.subplots()[1])  # a given Axes: grouped bars on it, as asked
    assert len(one.patches) == 2 * len(res.df)
    assert [t.get_text() for t in one.get_legend().get_texts()] == ["n", "mean_cost"]
    ax = total.plot()
    assert [b.get_height() for b in ax.patches] == pytest.approx([float(total.df["n"][0])])
    with pytest.raises(PolicyError, match="no column 'cost'.*department, n, mean_cost"):
        res.plot(y="cost")


def test_columns_of_different_scales_each_get_a_readable_panel(db: Path,
                                                                 tmp_path: Path) -> None:
    """The README's quick start: a count in the thousands next to an average near 80. On one
    axis the average's bars were invisible; each gets its own panel whose y range holds its
    values and their intervals, and a saved file keeps every x label."""
    with _session(db) as s:
        res = s.sql("SELECT hospital, COUNT(*) AS n, AVG(age) AS avg FROM visits "
                    "GROUP BY hospital", epsilon=1)
    panels = res.plot()
    fig = panels.figure
    assert len(panels) == 2 and len(fig.axes) == 2
    shown = res.with_intervals()
    for panel, col in zip(panels, ["n", "avg"]):
        bottom, top = panel.get_ylim()
        values = shown[col].astype(float)
        assert bottom <= values.min() and values.max() <= top, (col, panel.get_ylim())
        assert shown[f"{col}_high"].astype(float).max() <= top
        # the column's values fill a visible share of the panel (not squashed near zero)
        assert values.max() >= 0.3 * (top - bottom), (col, panel.get_ylim())
    assert float(shown["n"].max()) > 10 * float(shown["avg"].max())  # (scales do differ)
    out = tmp_path / "sales.png"
    fig.savefig(out)
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    for panel in panels:
        label = panel.xaxis.label.get_window_extent(renderer)
        assert panel.get_xlabel() == "hospital"
        assert page.x0 <= label.x0 and label.x1 <= page.x1, (label, page)
        assert page.y0 <= label.y0 and label.y1 <= page.y1, (label, page)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_budget_history_is_exact_for_disjoint_and_overlapping_queries(db: Path,
                                                                      tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    with _session(db, ledger) as s:
        s.sql("SELECT COUNT(*) FROM visits WHERE age < 18", epsilon=1)
        s.sql("SELECT COUNT(*) FROM visits WHERE age >= 65", epsilon=1)  # disjoint: free
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.5)  # overlaps both
        history = s.budget_history()
    assert history["query"].tolist() == ["q1", "q2", "q3"]
    assert history["alone"].tolist() == pytest.approx([1, 1, 0.5])
    assert history["added"].tolist() == pytest.approx([1, 0, 0.5])
    assert history["total"].tolist() == pytest.approx([1, 1, 1.5])
    assert history["sequential"].tolist() == pytest.approx([1, 2, 2.5])
    assert history["sql"][1] == "SELECT COUNT(*) FROM visits WHERE age >= 65"
    # another session on the same ledger sees the same history (the ledger is the record)
    with _session(db, ledger) as again:
        assert again.budget_history().equals(history)
        ax = again.plot_budget()
    (free,) = [c for c in ax.collections if c.get_label() == "free (disjoint data)"]
    assert free.get_offsets().tolist() == [[2.0, 1.0]]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert list(lines["privplan (general composition)"].get_ydata()) == [0, 1, 1, 1.5, 1.5]
    assert list(lines["sequential composition"].get_ydata()) == [0, 1, 2, 2.5, 2.5]
    assert ax.get_title() == "budget: 1 of 3 queries free"


def test_cli_budget_plot_writes_a_picture(db: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    ledger = tmp_path / "l.sqlite"
    with _session(db, ledger) as s:
        s.sql("SELECT COUNT(*) FROM visits WHERE age < 18", epsilon=1)
        s.sql("SELECT COUNT(*) FROM visits WHERE age >= 65", epsilon=1)
    out = tmp_path / "budget.png"
    assert main(["budget", "--ledger", str(ledger), "--policy", str(demo_policy_path()),
                 "--plot", str(out)]) == 0
    assert "budget plot written" in capsys.readouterr().err
    image = mpimg.imread(out)
    assert image.shape[0] > 200 and image.shape[1] > 300
    assert np.unique(image.reshape(-1, image.shape[2]), axis=0).shape[0] > 20  # not blank
    code = main(["budget", "--ledger", str(ledger), "--policy", str(demo_policy_path()),
                 "--plot", str(tmp_path / "budget.txt")])
    assert code == EXIT_USAGE
    assert "must end in .png, .svg or .pdf" in capsys.readouterr().err
    assert not (tmp_path / "budget.txt").exists()


def test_without_matplotlib_the_error_says_how_to_install(db: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with _session(db) as s:
        res = s.sql("SELECT COUNT(*) AS n FROM visits", epsilon=1)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(PolicyError, match=r"pip install 'privplan\[plot\]'"):
        res.plot()
