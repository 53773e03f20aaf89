"""``examples/quickstart.ipynb`` runs from top to bottom in a fresh kernel, as a new user would
run it, and its answer shows as HTML (the ``_repr_html_`` views).

The kernel is this interpreter's, whatever kernels the machine or the user has installed: the
test writes an ipykernel kernelspec for ``sys.executable`` into its temporary directory under a
name of its own and puts that directory first on ``JUPYTER_PATH``. A kernelspec found by name
elsewhere (a user's ``python3`` for another Python, say) could run the notebook without this
checkout's privplan; writing one into the user's or the environment's Jupyter folders would
leave something behind. Needs ``nbclient``, ``nbformat`` and ``ipykernel``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import install as install_kernelspec
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"


@pytest.fixture
def kernel_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernelspec that runs this interpreter, found first (see the module docstring)."""
    name = f"privplan-test-{uuid.uuid4().hex[:8]}"
    prefix = tmp_path / "jupyter-prefix"
    install_kernelspec(kernel_name=name, prefix=str(prefix), display_name="privplan test")
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    return name


def test_committed_notebook_has_no_outputs() -> None:
    """Outputs hold noisy numbers that change every run: the notebook is kept stripped."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


def test_quickstart_notebook_runs_and_shows_html(tmp_path: Path, kernel_name: str) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    work = tmp_path / "work"  # the notebook writes its CSV file into its working folder
    work.mkdir()
    client = NotebookClient(nb, kernel_name=kernel_name, timeout=180,
                            resources={"metadata": {"path": str(work)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on an error

    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code)
    for cell in code:
        assert all(o.output_type != "error" for o in cell.outputs), cell.source
        stderr = [o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
        assert stderr == [], (cell.source, stderr)  # a first run shows no warnings either
    assert (work / "sales.csv").is_file()
    tagged = {tag: cell for cell in code for tag in cell.metadata.get("tags", [])}

    def html_of(tag: str) -> str:
        shown = [o for o in tagged[tag].outputs if o.output_type == "execute_result"]
        assert len(shown) == 1 and "text/html" in shown[0].data, tagged[tag].source
        return str(shown[0].data["text/html"])

    result = html_of("result")
    assert 'class="pp-answer"' in result and "cost ε=0.5" in result
    assert "n 95% interval" in result and "avg_amount 95% interval" in result
    for region in ("east", "north", "south", "west"):
        assert f">{region}</td>" in result
    assert "privplan-policy" in html_of("policy")
    assert "privplan-explanation" in html_of("explain")
    budget = html_of("budget")
    assert "privplan-session" in budget and "ε=0.75" in budget
    # the second of two disjoint queries adds nothing to the total
    printed = "".join(o.text for o in tagged["disjoint"].outputs if o.output_type == "stream")
    assert printed.strip() == "north added ε=0.25 - south added ε=0"
    # the answer's bars and the budget plot, drawn inline
    pictures = [o for o in tagged["plots"].outputs if "image/png" in o.get("data", {})]
    assert len(pictures) == 2, tagged["plots"].outputs
