-- title: Visits per hospital
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-rows: 4
-- why: GROUP BY over a key with declared public values (A, B, C, D) is a partitioning function
--      (Example IV.4): every visit is in exactly one group, so under add/remove the four noisy
--      counts cost max_g ε_g = ε (Theorem IV.6), not 4ε. Each group gets the whole ε = 1. The
--      keys come from the policy, not from the data, so no partition selection is needed.
SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital;

-- title: Visits per department
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: department
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: A second partition of the same table is not disjoint from the first: a visit is in one
--      hospital group AND in one department group, so both releases see it (sequential
--      composition across the two queries): the total becomes 1 + 1 = 2.
SELECT department, COUNT(*) AS n FROM visits GROUP BY department ORDER BY department;

-- title: Visits per hospital and department (20 cells)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: hospital, department
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=2.5
-- expect-rows: 20
-- why: Grouping by two public keys partitions the table into 4 x 5 = 20 cells; a visit is in one
--      cell, so all 20 counts together cost ε = 0.5. It overlaps both earlier queries: +0.5.
SELECT hospital, department, COUNT(*) AS n FROM visits
GROUP BY hospital, department ORDER BY hospital, department;

-- title: Visits by sex and insurance (a nullable boolean key)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: sex, insured
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=3.0
-- expect-rows: 6
-- oracle: SELECT s.sex, i.insured,
--      (SELECT COUNT(*) FROM visits v WHERE v.sex = s.sex
--       AND v.insured IS NOT DISTINCT FROM i.insured) AS n
--      FROM (VALUES ('F'), ('M')) s(sex), (VALUES (FALSE), (TRUE), (NULL::BOOLEAN)) i(insured)
--      ORDER BY sex, insured
-- why: A boolean column has a public domain by its type: FALSE, TRUE and, since the policy does
--      not declare it NOT NULL, NULL. So the six (sex, insured) groups are all released, even the
--      empty NULL ones (a noisy 0): whether a group is empty is never revealed by its absence.
--      Still one partition: ε = 0.5, and it overlaps everything before: +0.5.
SELECT sex, insured, COUNT(*) AS n FROM visits GROUP BY sex, insured ORDER BY sex, insured;
