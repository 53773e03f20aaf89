-- title: PUMS: people and income per age band
-- dataset: pums
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: CASE WHEN age < 30 THEN 'under 30' WHEN age < 50 THEN '30-49' ELSE '50+' END
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=1.0
-- why: A CASE with literal results is a public partition (no selection, pure ε works): each
--      person is in one band, so COUNT(*) and SUM(income) of all bands cost ε/2 + ε/2 = ε.
SELECT CASE WHEN age < 30 THEN 'under 30' WHEN age < 50 THEN '30-49' ELSE '50+' END AS band,
       COUNT(*) AS n, SUM(income) AS total_income
FROM PUMS.PUMS GROUP BY band ORDER BY band;

-- title: PUMS: income per age band with FILTER
-- budget: epsilon=1.0
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0 | epsilon=1.0 | epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: The same bands as disjoint FILTER regions on the integer age: each SUM gets the whole ε.
--      (The analyzer cannot see that the CASE groups above are the same sets, but that does not
--      matter: a person is in one group and one FILTER region either way, 1 + 1.)
SELECT SUM(income) FILTER (WHERE age < 30) AS under_30,
       SUM(income) FILTER (WHERE age BETWEEN 30 AND 49) AS age_30_49,
       SUM(income) FILTER (WHERE age >= 50) AS over_50
FROM PUMS.PUMS;
