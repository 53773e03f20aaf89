-- title: Pediatrics
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: An equality on a string column: the region is department = 'pediatrics'.
SELECT COUNT(*) AS n FROM visits WHERE department = 'pediatrics';

-- title: LIKE is not analysed: whole domain, pays
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: Truly, department LIKE 'ortho%' selects only orthopedics, disjoint from pediatrics. But
--      the analyzer does not reason about LIKE, and an analyzer must never under-charge
--      (DESIGN invariant 1): what it does not understand gets the whole domain as its region,
--      which overlaps everything. Conservative, so it pays: 1 + 1. Write
--      department = 'orthopedics' to get it for free.
SELECT COUNT(*) AS n FROM visits WHERE department LIKE 'ortho%';

-- title: A function in WHERE: whole domain
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=2.5
-- why: year(visit_date) = 2023 is the same as a 2023 date range, but a function call is not
--      analysed: whole domain, overlaps both earlier queries. Write
--      visit_date BETWEEN DATE '2023-01-01' AND DATE '2023-12-31' instead.
SELECT COUNT(*) AS n FROM visits WHERE year(visit_date) = 2023;

-- title: Comparing two columns: whole domain
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=3.0
-- why: length_of_stay > age relates two columns; regions are products of per-column sets, so
--      this predicate is over-approximated by the whole domain.
SELECT COUNT(*) AS n FROM visits WHERE length_of_stay > age;
