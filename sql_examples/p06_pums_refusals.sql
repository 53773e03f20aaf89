-- title: PUMS: adults
-- dataset: pums
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: One count over age >= 18; the refusals below must leave the total at 1.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE age >= 18;

-- title: PUMS: MODE(income) is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: MODE(income)
-- why: The most common income is not an answered aggregate (MAX, MEDIAN and percentiles are,
--      through the exponential mechanism: see 24_quantiles.sql).
SELECT MODE(income) AS top_income FROM PUMS.PUMS;

-- title: PUMS: SUM over a string column is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: educ
-- why: educ is declared a string (no numeric bounds): it cannot be summed.
SELECT SUM(educ) AS s FROM PUMS.PUMS;

-- title: PUMS: GROUP BY race with a pure-ε budget is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: partition selection
-- why: race has no public values: its groups need partition selection, which needs δ > 0.
SELECT race, COUNT(*) AS n FROM PUMS.PUMS GROUP BY race;

-- title: PUMS: a raw column in the output is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: neither grouped nor aggregated
-- why: income outside an aggregate would release raw values.
SELECT income, COUNT(*) AS n FROM PUMS.PUMS;

-- title: PUMS: standard deviation of income (squares on a coarser grid)
-- budget: epsilon=0.9
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=0.9
-- expect-mechanism-costs: epsilon=0.3 | epsilon=0.3 | epsilon=0.3
-- expect-marginal: epsilon=0.9
-- expect-total: epsilon=1.9
-- why: SUM(income²) is summed with income rounded to 1000 (500 steps of the 0..500000 range)
--      so that squares stay exact in 64-bit integers; SUM(income) uses the same grid (so the
--      variance is exactly that of the rounded values); COUNT(income) is exact.
--      Three overlapping mechanisms at ε/3; an adult with an income is in the first query too.
-- oracle: SELECT SQRT((SUM(POWER(ROUND_EVEN(LEAST(GREATEST(income, 0), 500000) / 1000, 0) * 1000, 2))
--      / COUNT(income) - POWER(SUM(ROUND_EVEN(LEAST(GREATEST(income, 0), 500000) / 1000, 0) * 1000)
--      / COUNT(income), 2)) * COUNT(income) / (COUNT(income) - 1)) AS sd_income FROM PUMS.PUMS
SELECT STDDEV(income) AS sd_income FROM PUMS.PUMS;
