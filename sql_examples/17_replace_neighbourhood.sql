-- title: Visits per hospital, bounded DP (replace one visit)
-- dataset: demo
-- neighbourhood: replace
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5
-- expect-marginal: epsilon=1.0
-- why: This file's policy declares neighbourhood: replace (the table size is public; neighbours
--      differ by changing one visit). A changed visit can move from one group to another, so a
--      pair affects two groups: cost max_{g≠h}(ε_g + ε_h) (Corollary IV.13). Each group's count
--      therefore gets ε/2, and the query costs ε — not ε/2 (the wrong add/remove max).
SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital;

-- title: Children
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: One count: a change moves it by at most 1, so it gets the whole ε. A child's visit in A
--      changed into an adult's visit in B pays 0.5 + 0.5 + 1 = 2.
SELECT COUNT(*) AS n FROM visits WHERE age < 18;

-- title: Seniors: disjoint from the children, but NOT free under replace
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=3.0
-- why: Under add/remove this would cost 0 extra (disjoint regions). Under replace, one pair can
--      change a child's visit into a senior's: it affects both regions, so it pays both queries:
--      0.5 + 0.5 + 1 + 1 = 3.
SELECT COUNT(*) AS n FROM visits WHERE age >= 65;

-- title: Insured and uninsured (disjoint FILTERs under replace)
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=4.0
-- why: Same rule inside one query: an insured visit can be replaced by an uninsured one, so the
--      two disjoint FILTERs are affected together and get ε/2 each.
SELECT COUNT(*) FILTER (WHERE insured) AS insured,
       COUNT(*) FILTER (WHERE NOT insured) AS uninsured
FROM visits;
