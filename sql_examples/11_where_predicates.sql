-- title: Cardiology and oncology (IN)
-- dataset: demo
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- why: IN (…) is an OR of equalities: the region is department ∈ {cardiology, oncology}.
SELECT COUNT(*) AS n FROM visits WHERE department IN ('cardiology', 'oncology');

-- title: Every other department (NOT IN: disjoint)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=0.5
-- why: NOT IN is TRUE exactly where IN is FALSE (a NULL department makes both UNKNOWN, so it is
--      in neither region): disjoint from the first query, free.
SELECT COUNT(*) AS n FROM visits WHERE department NOT IN ('cardiology', 'oncology');

-- title: Cost in 2023 (BETWEEN over dates)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=1.0
-- why: A date range is an interval of the (discrete) date domain. It overlaps the department
--      regions: a 2023 cardiology visit pays 0.5 + 0.5.
SELECT SUM(cost) AS total_cost FROM visits
WHERE visit_date BETWEEN DATE '2023-01-01' AND DATE '2023-12-31';

-- title: Cost from 2024 on (a string literal compared with a date)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: '2024-01-01' is read as a date (as DuckDB casts it), so visit_date >= 2024-01-01 is
--      disjoint from the 2023 interval: a visit pays one department query and one year: 1.0.
SELECT SUM(cost) AS total_cost FROM visits WHERE visit_date >= '2024-01-01';

-- title: Visits without a cost (IS NULL)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: SUM(cost) ignores NULL costs, so the two SUM queries depend only on visits with
--      cost IS NOT NULL; cost IS NULL is disjoint from both. A visit without a cost paid only a
--      department query (0.5) so far: 0.5 + 0.5 = 1.0, the total does not move.
SELECT COUNT(*) AS n FROM visits WHERE cost IS NULL;

-- title: Women in their thirties (AND of BETWEEN and =)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=1.5
-- why: This region overlaps a department query and a year query: a woman of 35 with a cost,
--      in cardiology, in 2023 pays 0.5 (IN) + 0.5 (2023) + 0.5 (this) = 1.5.
SELECT COUNT(*) AS n FROM visits WHERE age BETWEEN 30 AND 39 AND sex = 'F';
