-- title: Visits per hospital under zCDP
-- dataset: demo
-- session-budget: ZCDP(5)
-- budget: rho=0.5
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: rho=0.5
-- expect-marginal: rho=0.5
-- why: A zCDP session answers with discrete Gaussian noise. A partition costs one group's ρ
--      (Theorem VI.16: a compatible partition costs max ρ).
SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital;

-- title: Children and adults (disjoint FILTERs under zCDP)
-- budget: rho=0.5
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: rho=0.5
-- expect-mechanism-costs: rho=0.5 | rho=0.5
-- expect-marginal: rho=0.5
-- expect-total: rho=1.0
-- why: ρ adds over the mechanisms a pair affects (Theorems VI.13, VI.14): disjoint regions are
--      never affected together, so each FILTER gets the whole ρ = 0.5.
SELECT COUNT(*) FILTER (WHERE age < 18) AS children,
       COUNT(*) FILTER (WHERE age >= 18) AS adults
FROM visits;

-- title: Mean length of stay in oncology
-- budget: rho=0.2
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: rho=0.2
-- expect-mechanism-costs: rho=0.1 | rho=0.1
-- expect-marginal: rho=0.2
-- expect-total: rho=1.2
-- why: AVG = SUM / COUNT over the same region: ρ/2 each; an oncology visit is in every query.
SELECT AVG(length_of_stay) AS mean_los FROM visits WHERE department = 'oncology';

-- title: Pediatrics count (disjoint from oncology: free)
-- budget: rho=0.2
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: rho=0.2
-- expect-marginal: rho=0
-- expect-total: rho=1.2
-- why: department = 'pediatrics' is disjoint from department = 'oncology', and the other
--      queries cost a pediatric visit 1.0: 1.0 + 0.2 = 1.2, the maximum does not move.
SELECT COUNT(*) AS n FROM visits WHERE department = 'pediatrics';
