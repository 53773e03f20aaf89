-- title: Patients (one derived row per patient)
-- dataset: patients
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- oracle: SELECT COUNT(DISTINCT patient_id) AS patients FROM visits
-- why: The inner query groups the user-level table by its privacy unit, so it makes one row
--      per patient from that patient's own (bounded) visits: a derived table with one row per
--      unit. Adding or removing a patient adds or removes one derived row, so the outer
--      COUNT(*) has sensitivity 1 (a COUNT(*) of visits would have 10, one per kept visit).
SELECT COUNT(*) AS patients FROM (SELECT patient_id FROM visits GROUP BY patient_id) AS p;

-- title: Visits per patient, capped at the policy's 10
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- oracle: SELECT AVG(LEAST(n, 10)) AS mean_visits FROM (SELECT patient_id, COUNT(*) AS n
--           FROM visits GROUP BY patient_id) AS p
-- why: A patient's derived COUNT(*) is at most max_rows_per_unit = 10 (the rows privplan keeps
--      per patient) and at least 1, so it is a column with bounds [1, 10]: AVG is a noisy
--      centred SUM and a noisy COUNT over the derived rows, ε/2 each. The derived table is
--      accounted as a table of its own (a patient is in both tables): the total adds up.
SELECT AVG(visits) AS mean_visits
FROM (SELECT patient_id, COUNT(*) AS visits FROM visits GROUP BY patient_id) AS p;

-- title: Patients by sex (a unit-level key)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: sex
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=3.0
-- expect-rows: 2
-- oracle: SELECT sex, COUNT(DISTINCT patient_id) AS patients FROM visits GROUP BY sex
--           ORDER BY sex
-- why: sex is declared unit_level (constant per patient), so the inner query may group by it
--      too and still make one row per patient; the outer GROUP BY sex partitions patients.
--      It is another inner query, so another derived table: its cost adds to the others.
SELECT sex, COUNT(*) AS patients
FROM (SELECT patient_id, sex FROM visits GROUP BY patient_id, sex) AS p
GROUP BY sex ORDER BY sex;
