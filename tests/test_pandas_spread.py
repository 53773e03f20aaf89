"""df.dp.var / df.dp.std: the SQL spelling's answer and cost (VAR_SAMP / STDDEV_SAMP, or the
_POP forms for ddof=0), and an unknown df.dp name names what exists."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled


@pytest.fixture
def frame(request: pytest.FixtureRequest) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"age": rng.integers(0, 90, 400), "hospital": rng.choice(["A", "B"], 400),
                       "case": request.node.name})
    df.dp.configure(bounds={"age": (0, 100)}, public_values={"hospital": ["A", "B"]},
                    budget=pp.PureDP(10))
    return df


@pytest.mark.parametrize(("method", "ddof", "func"), [
    ("var", 1, "VAR_SAMP"), ("var", 0, "VAR_POP"),
    ("std", 1, "STDDEV_SAMP"), ("std", 0, "STDDEV_POP")])
def test_same_answer_and_cost_as_the_sql(frame: pd.DataFrame, method: str, ddof: int,
                                         func: str) -> None:
    raw = pd.DataFrame({"age": frame["age"].to_numpy(), "hospital": frame["hospital"].to_numpy()})
    with noise_disabled():
        helper = getattr(frame.dp, method)("age", by="hospital", ddof=ddof, epsilon=0.5)
        via_sql = frame.dp.sql(f"SELECT hospital, {func}(age) AS age FROM df GROUP BY hospital",
                               epsilon=0.5)
    pd.testing.assert_frame_equal(helper, via_sql, check_dtype=False)
    assert helper.attrs["privplan_query_cost"] == via_sql.attrs["privplan_query_cost"]
    assert helper.attrs["privplan_query_cost"] == pp.PureDP(0.5)
    assert helper.attrs["privplan_sql"].startswith(f'SELECT "hospital", {func}("age")')
    exact = getattr(raw.groupby("hospital")["age"], method)(ddof=ddof)
    assert helper.set_index("hospital")["age"].to_dict() == pytest.approx(exact.to_dict())
    assert frame.dp.spent() == pp.PureDP(1.0)


def test_explain_and_where(frame: pd.DataFrame) -> None:
    plan = frame.dp.std("age", epsilon=0.3, explain=True)
    assert plan.marginal == pp.PureDP(0.3) and frame.dp.spent() == pp.PureDP(0)
    with noise_disabled():
        young = frame.dp.where("age < 30").var("age", epsilon=0.2)
    ages = frame["age"].to_numpy()
    assert young["age"].iloc[0] == pytest.approx(np.var(ages[ages < 30], ddof=1))


def test_bad_ddof_is_refused_and_spends_nothing(frame: pd.DataFrame) -> None:
    with pytest.raises(pp.UnsupportedQueryError, match=r"ddof=2 is not supported.*ddof=1"):
        frame.dp.var("age", ddof=2, epsilon=0.1)
    assert frame.dp.spent() == pp.PureDP(0)


def test_an_unknown_name_says_what_exists(frame: pd.DataFrame) -> None:
    with pytest.raises(AttributeError, match=r"no attribute 'stdev'.*std, sum.*did you mean "
                                             r"df\.dp\.std"):
        frame.dp.stdev("age")
    with pytest.raises(AttributeError, match=r"did you mean df\.dp\.median"):
        frame.dp.medain("age")
    with pytest.raises(AttributeError, match=r"df\.dp\.where\(\.\.\.\) has no attribute "
                                             r"'cuont'.*did you mean df\.dp\.where\(\.\.\.\)\.count"):
        frame.dp.where("age > 3").cuont()
    assert not hasattr(frame.dp, "_repr_html_")  # protocols probe private names: plain
    assert frame.dp.spent() == pp.PureDP(0)
