-- title: Insured and uninsured visits in one query
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0 | epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: Each FILTER (WHERE …) is its own mechanism with its own region. `insured` is TRUE on one
--      region and `NOT insured` is TRUE where insured is FALSE (NULL is in neither, three-valued
--      logic), so the regions are disjoint: one visit changes at most one of the two counts.
--      Parallel composition: each gets the whole ε = 1 and the query costs 1, not 2.
SELECT COUNT(*) FILTER (WHERE insured) AS insured,
       COUNT(*) FILTER (WHERE NOT insured) AS uninsured
FROM visits;

-- title: Cost by age band with FILTER
-- budget: epsilon=1.0
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0 | epsilon=1.0 | epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: age < 18, age BETWEEN 18 AND 64 and age >= 65 are three disjoint intervals of an
--      integer column: every SUM gets the whole ε = 1. A visit is in one band, and in one of
--      the two FILTERs of the first query: it pays 1 + 1 = 2.
SELECT SUM(cost) FILTER (WHERE age < 18) AS child_cost,
       SUM(cost) FILTER (WHERE age BETWEEN 18 AND 64) AS adult_cost,
       SUM(cost) FILTER (WHERE age >= 65) AS senior_cost
FROM visits;

-- title: Women and men per hospital (FILTER inside GROUP BY)
-- budget: epsilon=0.5
-- expect-mechanisms: 2
-- expect-partition: hospital
-- expect-query-cost: epsilon=0.5
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=2.5
-- why: Both rules at once: the hospital partition (a visit is in one group) and disjoint FILTER
--      regions (sex = 'F' vs sex = 'M') inside each group. A visit changes one count of one
--      group, so each of the 2 × 4 counts gets the whole ε = 0.5.
SELECT hospital,
       COUNT(*) FILTER (WHERE sex = 'F') AS women,
       COUNT(*) FILTER (WHERE sex = 'M') AS men
FROM visits GROUP BY hospital ORDER BY hospital;
