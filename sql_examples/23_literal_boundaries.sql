-- title: age < 18.5 (a decimal bound on an integer column)
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: DuckDB compares the integer age with 18.5 exactly, so the region is age <= 18 (it
--      includes 18 — truncating the literal to 18 would lose the 18-year-olds).
SELECT COUNT(*) AS n FROM visits WHERE age < 18.5;

-- title: age > 18 (disjoint: free)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: age >= 19 does not meet age <= 18.
SELECT COUNT(*) AS n FROM visits WHERE age > 18;

-- title: age = 18 (inside age < 18.5: pays)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: An 18-year-old's visit is in the first region (18 < 18.5) and in this one: 1 + 1.
SELECT COUNT(*) AS n FROM visits WHERE age = 18;

-- title: Departments before 'n' in string order
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=3.0
-- why: String comparisons are intervals in (binary) string order: cardiology and emergency.
--      An 18-year-old in cardiology pays 1 + 1 + 1.
SELECT COUNT(*) AS n FROM visits WHERE department < 'n';

-- title: Departments from 'n' on (disjoint: free)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=3.0
-- why: department >= 'n' is the complementary interval (oncology, orthopedics, pediatrics).
SELECT COUNT(*) AS n FROM visits WHERE department >= 'n';

-- title: Costs above the declared upper bound exist (the region is not empty)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=4.0
-- why: Bounds [0, 20000] say how sums are clamped, not which values occur: ~0.5% of the costs
--      are above 20000. Treating cost > 20000 as an empty region would charge 0 for a real count
--      (an under-charge); it overlaps everything before: 3 + 1.
SELECT COUNT(*) AS n FROM visits WHERE cost > 20000;
