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

-- title: PUMS: married or not, with integer literals (refused: the column would be converted)
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: compares VARCHAR with INTEGER
-- why: married is declared "string" in the YAML, so `married = 1` compares a string column with
--      an integer. DuckDB would convert every value of married to a number to compare, and a
--      value that is not a number would make the query fail: a failure that reveals such a row
--      exists, an un-noised bit. privplan refuses it before anything is spent (nothing is
--      charged: the total stays ε = 1). Compare strings with strings instead (next query).
SELECT COUNT(*) FILTER (WHERE married = 1) AS married,
       COUNT(*) FILTER (WHERE married = 0) AS not_married
FROM PUMS.PUMS;

-- title: PUMS: married or not, with string literals (disjoint: ε each)
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0 | epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: married = '1' and married = '0' are disjoint regions of the string column, so the two
--      FILTERs compose in parallel and each gets the whole ε. The marginal is ε = 1 (a person in
--      income_1 above is also in one of these counts).
SELECT COUNT(*) FILTER (WHERE married = '1') AS married,
       COUNT(*) FILTER (WHERE married = '0') AS not_married
FROM PUMS.PUMS;
