-- title: Median age
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- oracle: SELECT min(age) AS median_age FROM (SELECT age, count(*) OVER (ORDER BY age) AS c,
--           count(*) OVER () AS n FROM visits WHERE age IS NOT NULL) AS r WHERE 2 * c >= n
-- why: A quantile is the exponential mechanism over a grid of candidates (here every age
--      0..100): the engine returns only a histogram of the rows per candidate, and one
--      mechanism picks a candidate with probability ∝ exp(-ε·U/2Δ), U = how many rows of rank
--      the candidate is from the median. One mechanism over all rows: ε = 1. With noise off
--      it picks the smallest age with at least half the rows at or below it (the oracle).
SELECT MEDIAN(age) AS median_age FROM visits;

-- title: 90th percentile of cost per hospital
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- expect-rows: 4
-- oracle: SELECT hospital, min(g) * 50.0 AS p90 FROM (SELECT hospital, g,
--           count(*) OVER (PARTITION BY hospital ORDER BY g) AS c,
--           count(*) OVER (PARTITION BY hospital) AS n FROM (SELECT hospital,
--           CAST(LEAST(GREATEST(cost / 50, 0), 400) AS BIGINT) AS g FROM visits
--           WHERE cost IS NOT NULL) AS cells) AS r WHERE 10 * c >= 9 * n
--           GROUP BY hospital ORDER BY hospital
-- why: GROUP BY hospital partitions the rows, so the four per-hospital mechanisms cost one
--      group's ε (Theorem IV.6). cost's bounds [0, 20000] give 401 candidates 50 apart (at
--      most 1,000 candidates, on a round step), so with noise off the answer is the 90th
--      percentile of the costs rounded to 50 (the oracle). It overlaps the median: 1 + 1.
SELECT hospital, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY cost) AS p90
FROM visits GROUP BY hospital ORDER BY hospital;

-- title: Children's median cost
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=2.5
-- oracle: SELECT min(g) * 50.0 AS median_cost FROM (SELECT g, count(*) OVER (ORDER BY g) AS c,
--           count(*) OVER () AS n FROM (SELECT CAST(LEAST(GREATEST(cost / 50, 0), 400)
--           AS BIGINT) AS g FROM visits WHERE age < 18 AND cost IS NOT NULL) AS cells) AS r
--           WHERE 2 * c >= n
-- why: WHERE age < 18 is the mechanism's region (a dependency function like any other).
SELECT QUANTILE_CONT(cost, 0.5) AS median_cost FROM visits WHERE age < 18;

-- title: Seniors' longest stay (disjoint from the children: free)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=2.5
-- oracle: SELECT max(LEAST(GREATEST(length_of_stay, 0), 30)) AS longest FROM visits
--           WHERE age >= 65
-- why: MAX is the 1-quantile (with noise off: the smallest candidate with every row at or
--      below it, the true maximum of the values clamped to the bounds [0, 30]). Its region age >= 65 is disjoint from the previous
--      query's age < 18: no record changes both, so the session pays max(0.5, 0.5) for them.
--      (A DP MAX can land below the true one when few rows are near the top, and a DP MIN
--      anywhere between the lower bound and the true minimum: every such value is an exact
--      0-quantile.) A row added only raises MAX's utility (rows above a candidate), so under
--      add/remove it picks with exp(-ε·U/Δ), twice as sharp as the median's for the same ε.
SELECT MAX(length_of_stay) AS longest FROM visits WHERE age >= 65;

-- title: Median cost of insured and uninsured visits (disjoint FILTERs)
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0 | epsilon=1.0
-- expect-marginal: epsilon=1.0
-- oracle: SELECT (SELECT min(g) * 50.0 FROM (SELECT g, count(*) OVER (ORDER BY g) AS c,
--           count(*) OVER () AS n FROM (SELECT CAST(LEAST(GREATEST(cost / 50, 0), 400)
--           AS BIGINT) AS g FROM visits WHERE insured AND cost IS NOT NULL) AS a) AS r
--           WHERE 2 * c >= n) AS ins, (SELECT min(g) * 50.0 FROM (SELECT g,
--           count(*) OVER (ORDER BY g) AS c, count(*) OVER () AS n FROM (SELECT
--           CAST(LEAST(GREATEST(cost / 50, 0), 400) AS BIGINT) AS g FROM visits
--           WHERE NOT insured AND cost IS NOT NULL) AS b) AS r WHERE 2 * c >= n) AS unins
-- why: FILTER (WHERE insured) and FILTER (WHERE NOT insured) are disjoint regions (a NULL
--      insured is in neither), so each median gets the whole ε = 1.
SELECT MEDIAN(cost) FILTER (WHERE insured) AS ins,
       MEDIAN(cost) FILTER (WHERE NOT insured) AS unins
FROM visits;
