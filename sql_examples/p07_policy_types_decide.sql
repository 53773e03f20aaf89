-- title: PUMS: married = '1'
-- dataset: pums
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: Region married = '1'. married is declared "string" in the SmartNoise YAML but the CSV
--      stores 0/1 integers; privplan reads every column in its policy type (here
--      TRY_CAST(married AS VARCHAR)), so the query compares strings, as the analyzer assumes.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE married = '1';

-- title: PUMS: married = '0' (disjoint: free)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: '0' and '1' are different strings: disjoint regions, free.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE married = '0';

-- title: PUMS: married = '01' is a third, disjoint string (and matches nobody)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: As strings '01' differs from '1' and '0', so the analyzer finds this region disjoint
--      from both: free. That is only sound because the engine compares the same way: had it
--      compared the CSV's raw integers, married = '01' would be cast to married = 1 and release
--      the first query's count a second time for free (an under-charge). With policy-typed
--      reads the answer is a noisy 0 — no one is married = '01' — consistent with the region.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE married = '01';
