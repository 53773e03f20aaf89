-- title: PUMS: adults
-- dataset: pums
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: One count over age >= 18; the refusals below must leave the total at 1.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE age >= 18;

-- title: PUMS: MAX(income) is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: MAX(income)
-- why: The maximum is one person's value.
SELECT MAX(income) AS top_income FROM PUMS.PUMS;

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

-- title: PUMS: standard deviation of income is refused (sum of squares would overflow)
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: 2^62
-- why: income² reaches 2.5·10^11 per row; the engine refuses exact sums that could leave 64-bit
--      integers for up to 2^40 rows (it does not use the metadata's rows: 1000).
SELECT STDDEV(income) AS sd_income FROM PUMS.PUMS;
