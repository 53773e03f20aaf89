-- title: PUMS: married = '1'
-- dataset: pums
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: Region married = '1' (married is declared "string" in the SmartNoise YAML).
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE married = '1';

-- title: PUMS: married = '0' (disjoint: free)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: '0' and '1' are different strings and, after DuckDB's cast to the CSV's integer column,
--      different numbers: disjoint, free.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE married = '0';

-- title: PUMS: married = '01' selects the same people as married = '1'
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: The CSV column is BIGINT, so DuckDB evaluates married = '01' as married = 1: the same 549
--      people as the first query. Releasing the same count twice must cost 1 + 1 = 2. As strings
--      '01' and '1' differ, so an analyzer that trusts the declared type finds the regions
--      disjoint and charges 0: an under-charge (DESIGN invariant 1). The safe answers are to
--      check declared types against the data (refuse the mismatch) or to treat the literal as
--      not analysable (whole domain).
--      KNOWN ENGINE DISAGREEMENT: the engine charges ε=0 — see tests/test_sql_examples.py,
--      KNOWN_ENGINE_DISAGREEMENTS.
SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE married = '01';
