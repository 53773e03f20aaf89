-- title: Children and seniors in one result (UNION ALL of disjoint branches)
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0 | epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: Each branch of a UNION ALL is its own aggregate with its own WHERE region. age < 18 and
--      age >= 65 are disjoint: a visit changes at most one branch, so each gets the whole ε.
--      The literal labels are constants of the query text, not data.
SELECT 'child' AS band, COUNT(*) AS n FROM visits WHERE age < 18
UNION ALL
SELECT 'senior' AS band, COUNT(*) AS n FROM visits WHERE age >= 65;

-- title: Cost per hospital for insured and uninsured visits
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0 | epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: Two grouped branches over disjoint WHERE regions (insured vs NOT insured): a visit is in
--      one branch and, there, in one hospital group. Each branch gets the whole ε = 1. A child's
--      visit is also in the first query: 1 + 1 = 2.
SELECT 'insured' AS payer, hospital, SUM(cost) AS total_cost
FROM visits WHERE insured GROUP BY hospital
UNION ALL
SELECT 'self-pay' AS payer, hospital, SUM(cost) AS total_cost
FROM visits WHERE NOT insured GROUP BY hospital
ORDER BY payer, hospital;

-- title: All visits and insured visits (UNION ALL of overlapping branches)
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=3.0
-- why: The insured branch is inside the unrestricted one: overlapping regions, so the branches
--      split ε (ε/2 each), exactly as two overlapping aggregates in one SELECT would.
SELECT 'all' AS grp, COUNT(*) AS n FROM visits
UNION ALL
SELECT 'insured' AS grp, COUNT(*) AS n FROM visits WHERE insured;
