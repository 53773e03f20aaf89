-- title: Visits per age (a key without public values: partition selection)
-- dataset: demo
-- session-budget: ApproxDP(10, 1e-5)
-- budget: epsilon=1.0, delta=1e-6
-- expect-mechanisms: 2
-- expect-partition: age
-- expect-query-cost: epsilon=1.0, delta=1e-6
-- expect-mechanism-costs: epsilon=0.5, delta=0 | epsilon=0.5, delta=1e-6
-- expect-marginal: epsilon=1.0, delta=1e-6
-- why: age has bounds but no public_values, so which ages occur is private: a group may only be
--      released if a noisy count passes a threshold (DP partition selection, one more mechanism).
--      A group that exists only because of one visit passes with probability <= δ, which is why
--      the budget must be (ε, δ). Count and selection count overlap: ε/2 each; all of δ goes to
--      selection, the Laplace count uses δ = 0. The age groups are a partition: one group's cost.
SELECT age, COUNT(*) AS n FROM visits GROUP BY age ORDER BY age;

-- title: Mean cost per age among seniors (selection inside a WHERE region)
-- budget: epsilon=0.9, delta=1e-6
-- expect-mechanisms: 3
-- expect-partition: age
-- expect-query-cost: epsilon=0.9, delta=1e-6
-- expect-mechanism-costs: epsilon=0.3, delta=0 | epsilon=0.3, delta=0 | epsilon=0.3, delta=1e-6
-- expect-marginal: epsilon=0.9, delta=1e-6
-- expect-total: epsilon=1.9, delta=2e-6
-- why: SUM(cost), COUNT(cost) and the selection count (region age >= 65) overlap: ε/3 each, δ to
--      the selection. A senior's visit is also in the first query, so ε and δ both add
--      (Theorems VI.4, VI.7): (1 + 0.9, 1e-6 + 1e-6).
SELECT age, AVG(cost) AS mean_cost FROM visits WHERE age >= 65 GROUP BY age ORDER BY age;

-- title: Public keys need no δ, even in an (ε, δ) session
-- budget: epsilon=1.0, delta=1e-6
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0, delta=0
-- expect-marginal: epsilon=1.0, delta=0
-- expect-total: epsilon=2.9, delta=2e-6
-- why: hospital has public values: no selection, and the discrete Laplace count is pure ε-DP,
--      so the query is charged (ε, 0) — only what its noise really costs, never more than the
--      budget offered. The worst visit (a senior) now pays 1 + 0.9 + 1 = 2.9.
SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital;

-- title: Visits per decade of age (an expression key without public values)
-- budget: epsilon=0.5, delta=1e-6
-- expect-mechanisms: 2
-- expect-partition: FLOOR(age / 10) * 10
-- expect-query-cost: epsilon=0.5, delta=1e-6
-- expect-mechanism-costs: epsilon=0.25, delta=0 | epsilon=0.25, delta=1e-6
-- expect-marginal: epsilon=0.5, delta=1e-6
-- expect-total: epsilon=3.4, delta=3e-6
-- why: An arithmetic key is deterministic, so still a partition, but its values come from the
--      data: partition selection again (ε/2 each, δ to the selection).
SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n FROM visits GROUP BY decade ORDER BY decade;
