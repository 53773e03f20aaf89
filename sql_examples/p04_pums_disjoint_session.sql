-- title: PUMS: mean income under 40
-- dataset: pums
-- budget: epsilon=0.5
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- why: AVG = SUM(income) / COUNT(income) over age < 40: ε/2 each.
SELECT AVG(income) AS mean_income FROM PUMS.PUMS WHERE age < 40;

-- title: PUMS: mean income from 40 (disjoint: free)
-- budget: epsilon=0.5
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=0.5
-- why: age >= 40 and age < 40 are disjoint: nobody pays both.
SELECT AVG(income) AS mean_income FROM PUMS.PUMS WHERE age >= 40;

-- title: PUMS: high earners (overlaps both: pays)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=1.0
-- why: income > 100000 says nothing about age: 0.5 + 0.5.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE income > 100000;

-- title: PUMS: everyone else (NOT: disjoint from the high earners, free)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: NOT (income > 100000) is income <= 100000 (and income IS NOT NULL): disjoint from the
--      third query, so a person pays one age query and one income query: 1.0.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE NOT (income > 100000);
