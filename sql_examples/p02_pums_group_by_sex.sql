-- title: PUMS: count and mean income by sex (partition selection)
-- dataset: pums
-- session-budget: ApproxDP(10, 1e-5)
-- budget: epsilon=1.0, delta=1e-6
-- expect-mechanisms: 4
-- expect-partition: sex
-- expect-query-cost: epsilon=1.0, delta=1e-6
-- expect-mechanism-costs: epsilon=0.25, delta=0 | epsilon=0.25, delta=0 | epsilon=0.25, delta=0 | epsilon=0.25, delta=1e-6
-- expect-marginal: epsilon=1.0, delta=1e-6
-- why: The metadata gives sex no public values, so its groups are released through partition
--      selection: COUNT(*), SUM(income), COUNT(income) and the selection count overlap, ε/4
--      each, δ all to the selection. Both sexes have hundreds of rows and pass the threshold.
SELECT sex, COUNT(*) AS n, AVG(income) AS mean_income
FROM PUMS.PUMS GROUP BY sex ORDER BY sex;

-- title: PUMS: income of people 65+ by sex
-- budget: epsilon=0.5, delta=1e-6
-- expect-mechanisms: 2
-- expect-partition: sex
-- expect-query-cost: epsilon=0.5, delta=1e-6
-- expect-mechanism-costs: epsilon=0.25, delta=0 | epsilon=0.25, delta=1e-6
-- expect-marginal: epsilon=0.5, delta=1e-6
-- expect-total: epsilon=1.5, delta=2e-6
-- why: SUM(income) and the selection count over the region age >= 65: ε/2 each. A senior is in
--      the first query too: ε and δ add, (1.5, 2e-6).
SELECT sex, SUM(income) AS total_income FROM PUMS.PUMS WHERE age >= 65
GROUP BY sex ORDER BY sex;

-- title: PUMS: people under 30 by sex (disjoint from 65+: free, δ included)
-- budget: epsilon=0.5, delta=1e-6
-- expect-mechanisms: 2
-- expect-partition: sex
-- expect-query-cost: epsilon=0.5, delta=1e-6
-- expect-marginal: epsilon=0, delta=0
-- expect-total: epsilon=1.5, delta=2e-6
-- why: age < 30 is disjoint from age >= 65, so a person pays the first query and at most one of
--      the other two: (1 + 0.5, 1e-6 + 1e-6), the same worst case as before. δ composes over the
--      affected mechanisms exactly like ε (Theorem VI.7).
SELECT sex, COUNT(*) AS n FROM PUMS.PUMS WHERE age < 30 GROUP BY sex ORDER BY sex;
