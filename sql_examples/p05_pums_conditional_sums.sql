-- title: PUMS: income by sex with CASE (string literals on a string-declared column)
-- dataset: pums
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0 | epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: The metadata declares sex as a string; sex = '1' and sex = '0' are disjoint regions, so
--      each conditional SUM gets the whole ε. (The CSV stores 0/1 as integers; DuckDB casts the
--      string literals, which are different numbers here.)
SELECT SUM(CASE WHEN sex = '1' THEN income ELSE 0 END) AS income_1,
       SUM(CASE WHEN sex = '0' THEN income ELSE 0 END) AS income_0
FROM PUMS.PUMS;

-- title: PUMS: married or not, with integer literals (not analysed: split)
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: married is declared "string" in the YAML, so `married = 1` compares a string column with
--      an integer: the analyzer does not guess the cast and takes the whole domain for both
--      FILTERs (conservative). They then overlap and split ε. Write married = '1' /
--      married = '0' to get ε each.
SELECT COUNT(*) FILTER (WHERE married = 1) AS married,
       COUNT(*) FILTER (WHERE married = 0) AS not_married
FROM PUMS.PUMS;
