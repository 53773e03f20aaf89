-- title: Visits per hospital under Gaussian DP
-- dataset: demo
-- session-budget: GDP(3)
-- budget: mu=1
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: mu=1
-- expect-marginal: mu=1
-- expect-total: mu=1
-- why: μ-GDP composes as the ℓ2 norm sqrt(Σ μ_i²) (Theorems VI.21, VI.22), over the mechanisms
--      a pair affects; a partition costs one group's μ. (μ values are compared to 1e-5: the
--      discrete Gaussian is charged its exact μ, a hair below the nominal one.)
SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital;

-- title: Children and adults (disjoint)
-- budget: mu=1
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: mu=1
-- expect-mechanism-costs: mu=1 | mu=1
-- expect-marginal: mu=1
-- expect-total: mu=sqrt(2)
-- why: Disjoint FILTERs: each gets μ = 1. A visit is in one hospital group and one FILTER, so the
--      session's μ becomes sqrt(1² + 1²) = sqrt(2), not 2. privplan reports the marginal in
--      μ² terms (μ² adds): sqrt(2 − 1) = 1.
SELECT COUNT(*) FILTER (WHERE age < 18) AS children,
       COUNT(*) FILTER (WHERE age >= 18) AS adults
FROM visits;

-- title: Count and sum of ages (overlapping, ℓ2 split)
-- budget: mu=1
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: mu=1
-- expect-mechanism-costs: mu=sqrt(1/2) | mu=sqrt(1/2)
-- expect-marginal: mu=1
-- expect-total: mu=sqrt(3)
-- why: Two overlapping mechanisms share μ in the ℓ2 sense: μ_i = 1/sqrt(2) each, so that
--      sqrt(1/2 + 1/2) = 1 (not μ/2 each as for ε). Session: sqrt(1 + 1 + 1) = sqrt(3).
SELECT COUNT(*) AS n, SUM(age) AS total_age FROM visits;
