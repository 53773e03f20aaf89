-- title: Under 65 and adults (overlapping FILTERs)
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=1.0
-- why: age < 65 and age >= 18 overlap on 18..64: a visit of a 40-year-old changes both counts,
--      so the two must share the budget (sequential composition on the overlap): ε/2 each.
SELECT COUNT(*) FILTER (WHERE age < 65) AS under_65,
       COUNT(*) FILTER (WHERE age >= 18) AS adults
FROM visits;

-- title: Total and two disjoint hospitals
-- budget: epsilon=1.0
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: hospital = 'A' and hospital = 'B' are disjoint, but both overlap the total. The worst
--      visit (in A or B) changes two of the three counts, so the composed cost of weights
--      (1, 1, 1) is 2 and each mechanism gets ε/2 — not ε/3 (that would ignore the
--      disjointness) and not ε (that would ignore the overlap with the total).
SELECT COUNT(*) AS total,
       COUNT(*) FILTER (WHERE hospital = 'A') AS in_a,
       COUNT(*) FILTER (WHERE hospital = 'B') AS in_b
FROM visits;

-- title: Bed-days of women, of men, and of everyone (conditional SUM with CASE)
-- budget: epsilon=0.9
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=0.9
-- expect-mechanism-costs: epsilon=0.45 | epsilon=0.45 | epsilon=0.45
-- expect-marginal: epsilon=0.9
-- expect-total: epsilon=2.9
-- why: SUM(CASE WHEN p THEN x ELSE 0 END) is SUM(x) over the region p (a record outside p adds
--      exactly 0). F and M are disjoint, the plain SUM overlaps both: as above, the worst
--      record is in two of three regions, so ε/2 each.
SELECT SUM(CASE WHEN sex = 'F' THEN length_of_stay ELSE 0 END) AS bed_days_f,
       SUM(CASE WHEN sex = 'M' THEN length_of_stay ELSE 0 END) AS bed_days_m,
       SUM(length_of_stay) AS bed_days
FROM visits;

-- title: Children, twice (one mechanism), free for the session
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=2.9
-- why: SUM(CASE WHEN age < 18 THEN 1 ELSE 0 END) and COUNT(*) FILTER (WHERE age < 18) are the
--      same count, computed and noised once (1 mechanism); the second column is post-processing.
--      Marginal: the session's worst visit so far is an adult in hospital A or B (0.5 + 0.5 +
--      0.5 + 0.5 + 0.9 = 2.9); a child had 0.5 of slack in the first query (only under_65
--      contains it): 0.5 + 1 + 0.9 + 0.5 = 2.9. The maximum does not move: this query adds 0.
SELECT SUM(CASE WHEN age < 18 THEN 1 ELSE 0 END) AS children,
       COUNT(*) FILTER (WHERE age < 18) AS children_again
FROM visits;
