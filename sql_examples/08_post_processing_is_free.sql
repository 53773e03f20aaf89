-- title: The two busiest hospitals (HAVING, ORDER BY, LIMIT)
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: HAVING, ORDER BY and LIMIT run on the noisy per-group table, never on raw rows, so they
--      are post-processing of a DP output and cost nothing. COUNT(*) in the select list and in
--      HAVING is one released value: one mechanism, the hospital partition, ε = 1.
SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital
HAVING COUNT(*) > 3000 ORDER BY n DESC LIMIT 2;

-- title: Share of insured visits per department (arithmetic over aggregates)
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: department
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: The ratio and ROUND are computed from two noisy counts (free); the counts themselves are
--      two mechanisms — COUNT(*) FILTER (WHERE insured) lies inside COUNT(*), so they overlap:
--      ε/2 each. Department partition vs hospital partition: both paid.
SELECT department,
       ROUND(100.0 * COUNT(*) FILTER (WHERE insured) / COUNT(*), 1) AS pct_insured
FROM visits GROUP BY department ORDER BY pct_insured DESC, department;

-- title: Mean cost of the large hospitals (HAVING on an aggregate that is not selected)
-- budget: epsilon=0.9
-- expect-mechanisms: 3
-- expect-partition: hospital
-- expect-query-cost: epsilon=0.9
-- expect-mechanism-costs: epsilon=0.3 | epsilon=0.3 | epsilon=0.3
-- expect-marginal: epsilon=0.9
-- expect-total: epsilon=2.9
-- why: Filtering and sorting are free, but what they filter on must itself be released: the
--      COUNT(*) of HAVING and ORDER BY is a third noisy value next to SUM(cost) and COUNT(cost)
--      (for AVG). Three overlapping mechanisms: ε/3 each. Only its use is post-processing.
SELECT hospital, AVG(cost) AS mean_cost FROM visits GROUP BY hospital
HAVING COUNT(*) >= 2000 ORDER BY COUNT(*) DESC;
