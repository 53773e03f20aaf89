-- title: A normal query first (so "nothing spent" below is measured against a non-zero total)
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: One global count: ε = 1. Every refusal below must leave the total at 1.
SELECT COUNT(*) AS n FROM visits;

-- title: SELECT * returns rows
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: SELECT *
-- why: A DP query releases aggregates, never records; refused before anything is read.
SELECT * FROM visits;

-- title: A join of row-level private tables (here a self-join) is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: JOIN of private tables
-- why: In this policy a visit is the privacy unit, so nothing ties a row of one side to the
--      same person on the other: joining visits with visits on patient_id turns one visit into
--      as many output rows as the patient has visits, an unbounded stability. (Private tables
--      that share a privacy-unit column may be joined on it; public tables may be joined.)
SELECT COUNT(*) AS n FROM visits a JOIN visits b ON a.patient_id = b.patient_id;

-- title: Subqueries are refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: subquery
-- why: The analyzer only derives regions and sensitivities for one aggregate over one table.
SELECT COUNT(*) AS n FROM (SELECT * FROM visits);

-- title: Window functions are refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: window
-- why: COUNT(*) OVER () returns one row per record.
SELECT COUNT(*) OVER () AS n FROM visits;

-- title: random() is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: non-deterministic
-- why: A region must be a fixed set of records (a deterministic dependency function); a random
--      filter is not, and SQL randomness is never used as noise.
SELECT COUNT(*) AS n FROM visits WHERE random() < 0.5;

-- title: MODE is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: MODE(department)
-- why: The most frequent value is not one of the answered aggregates (a DP mode would be a
--      selection mechanism of its own); counting per group and taking the top row is.
SELECT MODE(department) AS top FROM visits;

-- title: SUM(DISTINCT) of an expression is refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: DISTINCT
-- why: Aggregates of the DISTINCT values of one column are answered (one row adds at most one
--      distinct value, see 27); of an expression, the distinct values are not on a grid the
--      policy bounds. Aggregate the column, or GROUP BY the expression.
SELECT SUM(DISTINCT cost * 2) AS total FROM visits;

-- title: SUM over a column without bounds is refused
-- budget: epsilon=1.0
-- expect-error: PolicyError: bounds
-- why: patient_id has no lower/upper in the policy, so one visit could move the sum arbitrarily:
--      no finite sensitivity, no calibrated noise.
SELECT SUM(patient_id) AS s FROM visits;

-- title: Two statements are refused
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: 2 statements
-- why: One call answers one query; privplan never runs the user's text directly.
SELECT COUNT(*) AS n FROM visits; DROP TABLE visits;

-- title: A private key without public values needs an (ε, δ) budget
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: partition selection
-- why: GROUP BY age would release which ages occur; that needs DP partition selection, which is
--      (ε, δ)-DP, but this session is pure ε-DP.
SELECT age, COUNT(*) AS n FROM visits GROUP BY age;

-- title: Over the session budget
-- budget: epsilon=9.5
-- expect-error: BudgetExceededError: budget exceeded
-- why: Every visit aged 18 or more is in the first query's region too: 1 + 9.5 > 10. Refused
--      before any data is read, nothing spent. (A query disjoint from the first would fit.)
SELECT COUNT(*) AS n FROM visits WHERE age >= 18;
