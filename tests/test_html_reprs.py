"""The notebook views (``_repr_html_``) of Result, Explanation, Policy and Session, as a person
sees them: each is put in a page that a real headless Chromium (driven by Playwright) renders
and photographs, and the assertions read the DOM as the browser built it — rows, headers,
interval cells, and that group keys, table and column names holding markup (``<script>``,
``<img onerror>``, ``&``) show as text and run nothing.

Needs Debian's Chromium at /usr/bin/chromium (``apt-get install -y chromium``) and the Python
package ``playwright`` (its own browser download, ``playwright install``, is not used). In CI
(``CI`` set, as ``.ci/run`` runs) the test fails without Chromium; elsewhere it is skipped with
the install command.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest
from PIL import Image

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.views.html import MAX_ROWS
from tests.servers import need

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
# as root, without a sandbox, and quiet: the machine has no network for Chromium's own services
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
WIDTH = 1200

HOSTILE_KEYS = ["<script>window.__pwned = 1</script>", "a & b",
                '<img src=x onerror="window.__pwned = 2">', "&lt;b&gt; &amp;"]
HOSTILE_TABLE, HOSTILE_KEY, HOSTILE_COUNT = "t<&>", "k<b>&", "n<i>&"


# ============================================================================== fixtures


@dataclass
class Demo:
    """A session over the demo database and what it answered and explained."""

    session: pp.Session[pp.PureDP]
    small: pp.Result[pp.PureDP]  # 4 groups, a count, an average and a sum
    big: pp.Result[pp.PureDP]  # more rows than a notebook shows
    explanation: Any
    ledger: Path
    database: Path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    root = tmp_path_factory.mktemp("html_reprs")
    database = write_demo_database(root / "demo.duckdb", rows=2000)
    ledger = root / "budget.sqlite"
    session = pp.connect(str(database), policy=demo_policy_path(), budget=pp.PureDP(3),
                         ledger=ledger)
    small = session.sql("SELECT hospital, COUNT(*) AS n, AVG(cost) AS c, "
                        "SUM(length_of_stay) AS los FROM visits GROUP BY hospital "
                        "ORDER BY hospital", epsilon=1)
    big = session.sql("SELECT hospital, department, sex, insured, COUNT(*) AS n FROM visits "
                      "GROUP BY hospital, department, sex, insured "
                      "ORDER BY hospital, department, sex, insured", epsilon=0.5)
    explanation = session.explain("SELECT department, SUM(cost) AS s FROM visits "
                                  "WHERE age < 18 GROUP BY department", epsilon=0.5)
    yield Demo(session, small, big, explanation, ledger, database)
    session.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.is_file():
        message = (f"{CHROMIUM} is missing: install Debian's Chromium (apt-get install -y "
                   "chromium; `.ci/run` does) to render the notebook views in a real browser")
        if os.environ.get("CI"):  # CI installs it: never skipped there
            pytest.fail(message)
        pytest.skip(message + " (outside CI only)")
    with need("playwright.sync_api").sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def show(browser: Browser, tmp_path: Path) -> Iterator[Any]:
    """``show(html)``: a page holding ``html`` as a notebook would (no network: the content is
    set directly, and any request the page still makes fails the test), photographed."""
    pages: list[Page] = []
    requests: list[str] = []

    def render(fragment: str) -> Page:
        page = browser.new_page(viewport={"width": WIDTH, "height": 700})
        pages.append(page)
        page.on("request", lambda request: requests.append(request.url))
        page.route("**/*", lambda route: route.abort())
        page.set_content("<!doctype html><html><head><meta charset='utf-8'><title>privplan"
                         f"</title></head><body>{fragment}</body></html>")
        png = page.screenshot(full_page=True)
        (tmp_path / f"page{len(pages)}.png").write_bytes(png)  # kept by pytest to look at
        _check_screenshot(png)
        return page

    yield render
    for page in pages:
        page.close()
    assert requests == [], f"the page asked for {requests}: a notebook view must be self-contained"


def _check_screenshot(png: bytes) -> None:
    """A real picture: a PNG the page's width, taller than a line, with dark text on a light
    page (not one colour, not empty)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(io.BytesIO(png)).convert("L")
    assert image.width == WIDTH and image.height >= 100, image.size
    histogram = image.histogram()  # pixels per grey level, 0 (black) to 255 (white)
    levels = [level for level, count in enumerate(histogram) if count]
    assert levels[-1] - levels[0] > 128, levels
    dark = sum(histogram[:128]) / (image.width * image.height)
    assert 0.001 < dark < 0.5, dark  # some text, on a mostly light page


def _texts(page: Page, selector: str) -> list[str]:
    return [" ".join(t.split()) for t in page.locator(selector).all_inner_texts()]


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", text)]


# ============================================================================== result


def test_result_shows_each_value_with_its_interval(demo: Demo, show: Any) -> None:
    result = demo.small
    page = show(result._repr_html_())
    assert _texts(page, "table.pp-answer thead th") == [
        "hospital", "n", "n 95% interval", "c", "c 95% interval", "los", "los 95% interval"]
    assert page.locator('th[data-column="n_low n_high"]').count() == 1
    rows = page.locator("table.pp-answer tbody tr")
    assert rows.count() == len(result.df) == 4
    expected = result.with_intervals()
    for i in range(4):
        cells = _texts(page, f"table.pp-answer tbody tr:nth-child({i + 1}) td")
        assert cells[0] == expected["hospital"].iloc[i]
        for position, column in ((1, "n"), (3, "c"), (5, "los")):
            value = float(cells[position])
            low, high = _numbers(cells[position + 1])
            assert value == pytest.approx(float(expected[column].iloc[i]), rel=1e-5, abs=1e-9)
            assert low == pytest.approx(float(expected[f"{column}_low"].iloc[i]), rel=1e-5)
            assert high == pytest.approx(float(expected[f"{column}_high"].iloc[i]), rel=1e-5)
            if column != "c":  # a count's and a sum's interval is the value ± its half-width
                assert low <= value <= high
    text = " ".join(page.inner_text("body").split())
    assert "DP result · 4 rows · cost ε=1" in text
    assert "ε=1 added to the session's composed total" in text
    assert _texts(page, "ul.pp-noise li")[0].startswith("n: discrete Laplace, scale 4")
    # the mechanisms are folded away until asked for
    mechanisms = page.locator("details table.pp-mechanisms")
    assert not mechanisms.is_visible()
    page.click("details summary")
    assert mechanisms.is_visible()
    assert mechanisms.locator("tbody tr.pp-mechanism").count() == 4


def test_result_shows_at_most_fifty_rows(demo: Demo, show: Any) -> None:
    result = demo.big
    rows = len(result.df)
    assert rows > MAX_ROWS == 50
    page = show(result._repr_html_())
    body = page.locator("table.pp-answer tbody tr")
    assert body.count() == MAX_ROWS + 1
    assert page.locator("table.pp-answer tbody tr.pp-more").count() == 1
    assert _texts(page, "tr.pp-more")[0].startswith(f"… {rows - MAX_ROWS} more rows ({rows} in")
    assert _texts(page, "table.pp-answer thead th")[-1] == "n 95% interval"
    first = _texts(page, "table.pp-answer tbody tr:first-child td")
    assert first[:4] == [str(v) for v in result.df.iloc[0, :4]]


def _hostile_session() -> pp.Session[pp.PureDP]:
    policy = pp.Policy.from_dict({"tables": {HOSTILE_TABLE: {"privacy_unit": "row", "columns": {
        HOSTILE_KEY: {"type": "str", "public_values": HOSTILE_KEYS},
        "x": {"type": "int", "lower": 0, "upper": 10}}}}})
    session = pp.connect(":memory:", policy=policy, budget=pp.PureDP(5))
    session.register(HOSTILE_TABLE, pd.DataFrame({HOSTILE_KEY: HOSTILE_KEYS * 5,
                                                  "x": [1, 2, 3, 4] * 5}))
    return session


def test_markup_in_keys_and_names_is_shown_as_text(show: Any) -> None:
    with _hostile_session() as session:
        result = session.sql(f'SELECT "{HOSTILE_KEY}", COUNT(*) AS "{HOSTILE_COUNT}" FROM '
                             f'"{HOSTILE_TABLE}" GROUP BY "{HOSTILE_KEY}" ORDER BY 1', epsilon=1)
        fragments = [result._repr_html_(), session.policy._repr_html_(), session._repr_html_(),
                     session.explain(f'SELECT COUNT(*) FROM "{HOSTILE_TABLE}" WHERE '
                                     f'"{HOSTILE_KEY}" = \'{HOSTILE_KEYS[0]}\'',
                                     epsilon=1)._repr_html_()]
    for fragment in fragments:
        assert "<script>window" not in fragment and "<img" not in fragment
    page = show("".join(fragments))
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.scripts.length") == 0
    assert page.locator("img, b b, table.pp-answer i").count() == 0
    # the browser shows exactly the strings the data and the policy hold
    keys = page.locator("table.pp-answer tbody tr td:first-child").all_text_contents()
    assert keys == sorted(HOSTILE_KEYS)
    headers = page.locator("table.pp-answer thead th").all_text_contents()
    assert headers == [HOSTILE_KEY, HOSTILE_COUNT, f"{HOSTILE_COUNT} 95% interval"]
    assert page.locator(".pp-table b").first.text_content() == HOSTILE_TABLE
    column_cells = page.locator("table.pp-columns tbody tr:first-child td").all_text_contents()
    assert column_cells[0] == HOSTILE_KEY
    assert column_cells[4] == ", ".join(sorted(HOSTILE_KEYS))
    assert f"{HOSTILE_TABLE} (private)" in page.inner_text("table.pp-budget")
    assert HOSTILE_KEYS[0] in page.inner_text(".privplan-explanation table.pp-mechanisms")


# ============================================================================== explain


def test_explanation_shows_costs_mechanisms_and_the_worst_case(demo: Demo, show: Any) -> None:
    explanation = demo.explanation
    page = show(explanation._repr_html_())
    summary = dict(zip(_texts(page, "table.pp-summary th"), _texts(page, "table.pp-summary td"),
                       strict=True))
    assert summary["Query cost (composed)"].startswith("ε=0.5 [sequential composition")
    assert summary["Marginal cost against the ledger"] == "ε=0.5"
    assert summary["Session total"] == "ε=1.5 → ε=2 of budget ε=3: within the budget"
    assert summary["Worst case"] == " ".join(explanation.witness.split())
    rows = page.locator("table.pp-mechanisms tbody tr.pp-mechanism")
    assert rows.count() == len(explanation.mechanisms) == 1
    mechanism = explanation.mechanisms[0]
    cells = _texts(page, "table.pp-mechanisms tbody tr.pp-mechanism td")
    assert cells[0] == mechanism.id
    assert cells[1] == "SUM(cost) per group of (department)"
    assert cells[2] == " ".join(mechanism.region.split())
    # sensitivity and noise in the column's units (the grid step is 0.01), as str() says
    assert cells[3] == "20000" and f"sensitivity {cells[3]}, {cells[4].split(';')[0]}" in str(
        explanation)
    assert cells[4] == "discrete Laplace, scale 40000; on a grid of step 0.01"
    assert cells[7] == "ε=0.5"
    assert "may overlap q1, q2" in page.inner_text("tr.pp-sub")
    assert "SELECT department, SUM(cost) AS s FROM visits" in page.inner_text("code")


def test_explanation_over_the_budget_says_it_would_be_refused(demo: Demo, show: Any) -> None:
    page = show(demo.session.explain("SELECT COUNT(*) FROM visits", epsilon=2)._repr_html_())
    warning = page.locator("table.pp-summary .pp-warn")
    assert warning.inner_text() == "EXCEEDS THE BUDGET: would be refused"
    assert warning.evaluate("e => getComputedStyle(e).fontWeight") == "600"


# ============================================================================== policy, session


def test_policy_lists_tables_and_columns(demo: Demo, show: Any) -> None:
    page = show(demo.session.policy._repr_html_())
    assert _texts(page, ".pp-title") == ["Privacy policy · 1 private, 1 public table"]
    tables = _texts(page, "div.pp-table")
    assert tables[0] == ("visits · private · each row is one person · neighbourhood: "
                         "add/remove one unit (unbounded DP)")
    assert tables[1].startswith("hospitals · public")
    columns = {cells[0]: cells for cells in (
        _texts(page, f"table.pp-columns tbody tr:nth-child({i}) td") for i in range(1, 11))}
    assert page.locator("table.pp-columns tbody tr").count() == len(columns) == 10
    assert columns["age"] == ["age", "int", "0", "100", "", ""]
    assert columns["cost"][:4] == ["cost", "float", "0", "20000"]
    assert columns["visit_date"][2:4] == ["2023-01-01", "2024-12-31"]
    assert columns["hospital"][4] == "A, B, C, D"


def test_session_shows_the_budget_spent_and_the_ledger(demo: Demo, show: Any) -> None:
    page = show(demo.session._repr_html_())
    fields = dict(zip(_texts(page, "table.pp-budget th"), _texts(page, "table.pp-budget td"),
                      strict=True))
    assert fields["Budget"] == "ε=3 (PureDP)"
    assert fields["Spent"] == "ε=1.5 50% of ε used"
    assert fields["Remaining"] == "ε=1.5"
    assert fields["Queries answered"] == "2"
    assert fields["Ledger"].endswith(demo.ledger.name)
    assert fields["Tables"] == "visits (private), hospitals (public)"
    meter = page.locator('[role="meter"]')
    assert meter.get_attribute("aria-valuenow") == "50"
    bar = meter.locator("span").bounding_box()
    track = meter.bounding_box()
    assert bar is not None and track is not None
    assert bar["width"] == pytest.approx(track["width"] / 2, abs=1.5)


def test_session_bars_each_parameter_of_its_budget(demo: Demo, show: Any) -> None:
    """(ε, δ) gets a bar for each; Gaussian DP's bar is of μ², what composition adds (μ=0.5
    spent of μ=1 is a quarter: μ≈0.866 remains)."""
    policy = pp.Policy.from_yaml(demo_policy_path())
    with pp.connect(":memory:", policy=policy, budget=pp.ApproxDP(2, 1e-6)) as approx, \
            pp.connect(str(demo.database), policy=policy, budget=pp.GDP(1)) as gaussian:
        gaussian.sql("SELECT COUNT(*) AS n FROM visits", mu=0.5)
        page = show(approx._repr_html_() + gaussian._repr_html_())
    bars = _texts(page, "table.pp-budget td div")
    assert bars == ["0% of ε used", "0% of δ used", "25% of μ² used"]
    assert page.locator('[role="meter"]').count() == 3
    fields = _texts(page, "table.pp-budget tr")
    assert "Queries answered 0" in fields and "Queries answered 1" in fields
    assert "Remaining μ=0.866025" in fields
    assert "Ledger in memory (forgotten when the session ends)" in fields


def test_plain_reprs_are_one_short_line(demo: Demo) -> None:
    for obj in (demo.session, demo.session.policy):
        text = repr(obj)
        assert "\n" not in text and len(text) < 200, text
    assert repr(demo.session).startswith("Session(PureDP ε=3, tables: visits, hospitals, ledger: ")
    assert repr(demo.session.policy) == ("Policy(visits (private, unit row, add_remove, "
                                         "10 columns); hospitals (public, 0 columns))")
